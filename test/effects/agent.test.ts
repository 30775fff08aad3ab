/**
 * Effects started by an AGENT (issue 5): a scripted root agent in a real turn-worker calls
 * `writes__propose`; the proposal is audited by a separate auditor profile, becomes a packet
 * paper + `gate.requested`, the task parks on the gate, role holders approve over HTTP, the
 * coordinator executes against the real target service, and the task wakes on what landed.
 *
 *  - the same change proposed again under a new tool-call id returns the recorded receipt: one
 *    operation at the target, one gate;
 *  - a later step binds the id an earlier step's effect returned (resolved before audit);
 *  - a proposal outside the case's write scope is refused before audit or gate: the target sees
 *    zero requests;
 *  - an auditor's rejection returns to the agent; nothing reaches a gate;
 *  - a rejected gate wakes the agent with the reason; nothing is executed.
 * All services run in ONE real node process (turn-worker, gate, coordinator, reconciler).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetConfig } from '@everdict/contracts';
import { openTestCase } from '../turns/helpers.js';
import { TOKENS, agentConnectors, proposeCredit as credit, effectsFixture, eventually, fleetConfig, type EffectsFixture, type ServiceProc } from './helpers.js';

let f: EffectsFixture;
let node: ServiceProc;
let config: FleetConfig;

/** Writes a script file into the fixture folder; returns its file name. */
function script(name: string, steps: unknown[]): string {
  writeFileSync(join(f.dir, `${name}.json`), JSON.stringify({ steps }));
  return `${name}.json`;
}

beforeAll(async () => {
  f = await effectsFixture('effects_agent');
  const base = fleetConfig();
  const route = (file: string) => ({ adapter: 'scripted' as const, model: 'scripted', scriptPath: file });
  const profile = (r: string, auditor = 'auditor') => ({ version: '1', route: r, prompt: 'You act on billing tickets.', auditor });
  config = {
    ...base,
    routes: {
      writer: route(
        script('writer', [
          { toolCalls: [credit('acct-w1', 700)] },
          // Woken by the outcome: the same change again, under a new tool-call id.
          { toolCalls: [credit('acct-w1', 700)] },
          // A later step binds the account id the first step's receipt returned.
          {
            toolCalls: [
              {
                name: 'writes__propose',
                arguments: {
                  planStepId: 'book-entry',
                  connector: 'estate',
                  operation: 'entries.add',
                  params: { entryId: 'w1-entry', account: { fromStep: 'credit-acct-w1', pointer: '/body/accountId' }, amount: 700 },
                  summary: 'book the credit in the ledger database',
                  revert: { kind: 'manual', description: 'delete the entry by hand' },
                  expectedCounts: { rows: 1 },
                },
              },
            ],
          },
          { text: 'Credited and booked.' },
        ]),
      ),
      outside: route(script('outside', [{ toolCalls: [credit('acct-out', 100)] }, { text: 'Could not credit: outside my scope.' }])),
      rejected: route(script('rejected', [{ toolCalls: [credit('acct-rej', 100)] }, { text: 'The auditor refused.' }])),
      refusedGate: route(script('refused-gate', [{ toolCalls: [credit('acct-gate', 100)] }, { text: 'The gate refused.' }])),
      lapsed: route(script('lapsed', [{ toolCalls: [credit('acct-lapsed', 100)] }, { text: 'Nobody decided in time.' }])),
      auditor: route(script('auditor', [{ text: '{"verdict": "approve", "reason": "amount and account match the cited ticket"}' }])),
      strict: route(script('strict', [{ text: 'I cannot approve this: {"verdict": "reject", "reason": "no evidence supports the amount"}' }])),
    },
    profiles: {
      writer: profile('writer'),
      outside: profile('outside'),
      rejected: profile('rejected', 'strictAuditor'),
      refusedGate: profile('refusedGate'),
      lapsed: profile('lapsed'),
      auditor: { version: '1', route: 'auditor', prompt: 'You audit write packets.' },
      strictAuditor: { version: '1', route: 'strict', prompt: 'You audit write packets strictly.' },
    },
    caseTypes: {
      writer: { rootProfile: 'writer', scope: { reads: 'all', writes: ['writes__propose', 'billing', 'estate'], forbidden: [] } },
      outside: { rootProfile: 'outside', scope: { reads: 'all', writes: ['writes__propose', 'estate'], forbidden: [] } },
      rejected: { rootProfile: 'rejected', scope: { reads: 'all', writes: ['writes__propose', 'billing'], forbidden: [] } },
      refusedGate: { rootProfile: 'refusedGate', scope: { reads: 'all', writes: ['writes__propose', 'billing'], forbidden: [] } },
      lapsed: { rootProfile: 'lapsed', scope: { reads: 'all', writes: ['writes__propose', 'billing'], forbidden: [] } },
    },
    connectors: agentConnectors(),
  };
  writeFileSync(join(f.dir, 'agents.json'), JSON.stringify(config, null, 2));
  node = await f.start({ services: ['turn-worker', 'gate', 'execution-coordinator', 'reconciler'], env: { EVERDICT_CONFIG: join(f.dir, 'agents.json') } });
});

afterAll(async () => {
  await f?.close();
});

async function open(caseType: string) {
  return openTestCase(f.store, config, { caseType, originKey: `agent-${caseType}-${Math.random()}`, objective: 'handle the ticket' });
}

async function task(taskId: string) {
  const { rows } = await f.db.query<{ state: string; park_reason: string | null; park_detail: Record<string, unknown> | null }>({ text: 'SELECT state, park_reason, park_detail FROM tasks WHERE id = $1::uuid', values: [taskId] });
  return rows[0]!;
}

async function gatesOf(caseId: string) {
  const { rows } = await f.db.query<{ id: string; state: string; packet_digest: string; operation: string; propose_call_id: string | null; packet_paper_id: string }>({
    text: 'SELECT id, state, packet_digest, operation, propose_call_id, packet_paper_id FROM gates WHERE case_id = $1::uuid ORDER BY created_at',
    values: [caseId],
  });
  return rows;
}

async function waitTask(taskId: string, state: string, parkReason?: string) {
  return eventually(
    async () => {
      const t = await task(taskId);
      return t.state === state && (parkReason === undefined || t.park_reason === parkReason) ? t : undefined;
    },
    { timeoutMs: 30_000, what: `task ${taskId} ${state}${parkReason ? `/${parkReason}` : ''}` },
  );
}

async function waitOpenGate(caseId: string, n: number) {
  return eventually(
    async () => {
      const gates = await gatesOf(caseId);
      return gates.length >= n && gates[n - 1]!.state === 'open' ? gates[n - 1] : undefined;
    },
    { timeoutMs: 30_000, what: `gate ${n} of case ${caseId} open` },
  );
}

/** The tool results the agent was shown, in journal order (the task's own tool calls; not the coordinator's executor lane). */
async function toolResults(taskId: string): Promise<{ name: string; content: string; outcome: string }[]> {
  const { rows } = await f.db.query<{ tool_name: string; bytes: Buffer }>({
    text: `SELECT c.tool_name, r.bytes FROM runtime_calls c
             JOIN papers p ON p.id = c.response_paper_id JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
            WHERE c.task_id = $1::uuid AND c.ordinal > 0 AND c.turn < 2147483647 ORDER BY c.turn, c.ordinal`,
    values: [taskId],
  });
  return rows.map((r) => {
    const rec = JSON.parse(r.bytes.toString('utf8')) as { content: string; outcome: string };
    return { name: r.tool_name, content: rec.content, outcome: rec.outcome };
  });
}

describe('effects proposed by an agent', () => {
  it('audit → gate → grant → one execution; the same change again returns the same receipt; a later step binds the returned id', async () => {
    const { caseId, taskId } = await open('writer');
    const gate = await waitOpenGate(caseId, 1);
    const parked = await waitTask(taskId, 'parked', 'gate');
    expect(parked.park_detail).toMatchObject({ kind: 'effect', gateId: gate!.id, packetDigest: gate!.packet_digest });
    expect(gate!.operation).toBe('accounts.credit');
    // The packet paper carries the independent auditor's verdict, bound to the digest.
    const { rows: paper } = await f.db.query<{ bytes: Buffer; content_hash: string }>({
      text: 'SELECT r.bytes, r.content_hash FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE p.id = $1::uuid',
      values: [gate!.packet_paper_id],
    });
    const packet = JSON.parse(paper[0]!.bytes.toString('utf8')) as Record<string, unknown>;
    expect(packet).toMatchObject({ digest: gate!.packet_digest, params: { accountId: 'acct-w1', amountCents: 700 }, impactKeys: ['billing:test:acct-w1'], target: { system: 'billing', environment: 'test' } });
    expect(packet['verdicts']).toEqual([expect.objectContaining({ kind: 'audit', verdict: 'approve', by: 'auditor@1', digest: gate!.packet_digest })]);
    expect(f.target.requests).toHaveLength(0); // nothing before a human approved

    const decided = await f.decide(node.port, TOKENS.bob, gate!.id, { decision: 'HW-payment', verdict: 'approve', digest: gate!.packet_digest });
    expect(decided.status, JSON.stringify(decided.body)).toBe(201);

    // The credit lands once; the agent re-proposes it (receipt) and proposes the booking, whose
    // account comes from the credit's receipt.
    const booking = await waitOpenGate(caseId, 2);
    expect(booking!.operation).toBe('entries.add');
    const { rows: bookingPaper } = await f.db.query<{ bytes: Buffer }>({
      text: 'SELECT r.bytes FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE p.id = $1::uuid',
      values: [booking!.packet_paper_id],
    });
    expect(JSON.parse(bookingPaper[0]!.bytes.toString('utf8'))).toMatchObject({ params: { entryId: 'w1-entry', account: 'acct-w1', amount: 700 } });
    for (const decision of ['HW-ddl', 'H5']) {
      const r = await f.decide(node.port, TOKENS.alice, booking!.id, { decision, verdict: 'approve', digest: booking!.packet_digest });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
    }
    await waitTask(taskId, 'done');

    expect(f.target.applies.get('acct-w1')).toBe(1);
    expect(f.target.mutations('acct-w1')).toHaveLength(1);
    expect(await f.estate.entries('w1-entry')).toBe(1);
    expect(await gatesOf(caseId)).toHaveLength(2); // the re-proposal asked no gate

    const results = await toolResults(taskId);
    expect(results.map((r) => r.name)).toEqual(['writes__propose', 'writes__propose', 'writes__propose']);
    expect(results[1]!.content).toMatch(/already applied/);
    expect(results[1]!.content).toContain('"balanceCents":700');
    const ledger = await f.ledger(caseId);
    const kinds = ledger.map((l) => l.kind);
    expect(kinds.filter((k) => k === 'effect_proposed')).toHaveLength(2);
    expect(kinds).toContain('effect_receipt_returned');
    expect(await f.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });

  it('a proposal outside the write scope is refused before audit and gate: the target sees zero requests', async () => {
    const { caseId, taskId } = await open('outside');
    await waitTask(taskId, 'done');
    expect(await gatesOf(caseId)).toHaveLength(0);
    expect(f.target.touching('acct-out')).toHaveLength(0);
    const [result] = await toolResults(taskId);
    expect(result).toMatchObject({ name: 'writes__propose', outcome: 'tool_error' });
    expect(result!.content).toMatch(/outside the case's write scope/);
  });

  it("an auditor's rejection returns to the agent; nothing reaches a gate", async () => {
    const { caseId, taskId } = await open('rejected');
    await waitTask(taskId, 'done');
    expect(await gatesOf(caseId)).toHaveLength(0);
    const [result] = await toolResults(taskId);
    expect(result!.content).toMatch(/auditor rejected the proposal: no evidence supports the amount/);
    const audit = (await f.ledger(caseId)).find((l) => l.kind === 'effect_audit');
    expect(audit?.body).toMatchObject({ verdict: 'reject', by: 'strictAuditor@1' });
    expect(f.target.touching('acct-rej')).toHaveLength(0);
  });

  it('a rejected gate wakes the agent with the reason; nothing is executed', async () => {
    const { caseId, taskId } = await open('refusedGate');
    const gate = await waitOpenGate(caseId, 1);
    await waitTask(taskId, 'parked', 'gate');
    const r = await f.decide(node.port, TOKENS.bob, gate!.id, { decision: 'HW-payment', verdict: 'reject', digest: gate!.packet_digest, reason: 'not this month' });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    await waitTask(taskId, 'done');
    expect(f.target.touching('acct-gate')).toHaveLength(0);
    const { rows } = await f.db.query<{ kind: string; body: Record<string, unknown> }>({ text: `SELECT kind, body FROM task_notes WHERE task_id = $1::uuid ORDER BY seq`, values: [taskId] });
    expect(rows.find((n) => n.kind === 'gate')?.body).toMatchObject({ gateId: gate!.id, outcome: 'rejected' });
  });

  it('a gate that expires undecided (closed by the reconciler) wakes the agent; nothing is executed', async () => {
    const { caseId, taskId } = await open('lapsed');
    const gate = await waitOpenGate(caseId, 1);
    await waitTask(taskId, 'parked', 'gate');
    await f.db.query({ text: `UPDATE gates SET expires_at = now() - interval '1 second' WHERE id = $1::uuid`, values: [gate!.id] });
    await waitTask(taskId, 'done');
    expect(f.target.touching('acct-lapsed')).toHaveLength(0);
    const { rows } = await f.db.query<{ kind: string; body: Record<string, unknown> }>({ text: `SELECT kind, body FROM task_notes WHERE task_id = $1::uuid ORDER BY seq`, values: [taskId] });
    expect(rows.find((n) => n.kind === 'gate')?.body).toMatchObject({ gateId: gate!.id, outcome: 'expired' });
  });
});
