/**
 * Evidence with provenance (issue 11 item 7), on real processes: a scripted agent in a real
 * turn-worker reads a REAL target HTTP service (connector read), then proposes a credit citing
 * that read by the tool-call id it knows. The auditor is a model behind a real HTTP provider
 * (providerServer, the OpenAI-compatible adapter) whose every request is recorded.
 *
 *  - the auditor's request carries the cited result with its provenance (origin connector,
 *    operation and target; trust; data class; content hash; size; truncation) and NOTHING of
 *    the author: not its prompt, not its objective, not its conversation;
 *  - the auditor calls a read of its own; it runs through the scope check and the journal
 *    (one `read` row under the proposing task's turn) and reaches the target once;
 *  - the packet in the gate carries the citation (journal call id + content hash), covered by
 *    the digest; approved, the write executes once;
 *  - a proposal citing a call id that names no read of the task is refused to the model,
 *    naming the field, before audit: the auditor is never asked;
 *  - the turn-worker SIGKILLed mid-audit, after the auditor's read completed: the resumed audit
 *    replays that read from the journal, the target sees no second request.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { payloadHash } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import { providerServer } from '@everdict/testkit';
import { openTestCase } from '../turns/helpers.js';
import { TOKENS, effectsFixture, eventually, fleetConfig, type EffectsFixture, type ServiceProc } from './helpers.js';

type Provider = Awaited<ReturnType<typeof providerServer>>;

let f: EffectsFixture;
let provider: Provider;
let config: FleetConfig;
const SERVICES = ['turn-worker', 'gate', 'execution-coordinator', 'reconciler'];
const AUTHOR_PROMPT = 'AUTHOR-PROMPT-7f3a: you credit accounts after reading them.';
const OBJECTIVE = 'OBJECTIVE-91c2: goodwill credit for ticket 1234';
const BILLING = { system: 'billing', environment: 'test' };

/** An OpenAI chat-completions answer: text, or tool calls. */
function completion(o: { text?: string; calls?: { id: string; name: string; args: unknown }[] }) {
  const message = {
    role: 'assistant',
    content: o.text ?? null,
    ...(o.calls ? { tool_calls: o.calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: JSON.stringify(c.args) } })) } : {}),
  };
  return { status: 200, body: JSON.stringify({ id: 'x', choices: [{ index: 0, message, finish_reason: o.calls ? 'tool_calls' : 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1 } }) };
}
const auditorReads = (account: string) => completion({ calls: [{ id: 'aud_1', name: 'billing__accounts_get', args: { accountId: account } }] });
const approve = completion({ text: '{"verdict": "approve", "reason": "the balance read supports the credit"}' });

function propose(account: string, evidence: string[]) {
  return {
    name: 'writes__propose',
    arguments: {
      planStepId: `credit-${account}`,
      connector: 'billing',
      operation: 'accounts.credit',
      params: { accountId: account, amountCents: 250 },
      summary: `credit 250 cents to ${account}`,
      revert: { kind: 'manual', description: 'debit the same amount by hand' },
      evidence,
    },
  };
}

function script(name: string, steps: unknown[]): string {
  writeFileSync(join(f.dir, `${name}.json`), JSON.stringify({ steps }));
  return `${name}.json`;
}

beforeAll(async () => {
  f = await effectsFixture('effects_evidence');
  provider = await providerServer();
  for (const a of ['acct-ev1', 'acct-ev2', 'acct-ev3']) f.target.balances.set(a, 1000);
  const route = (file: string) => ({ adapter: 'scripted' as const, model: 'scripted', scriptPath: file });
  const writer = (account: string, evidence: (readCallId: string) => string[]) =>
    route(
      script(`writer-${account}`, [
        { toolCalls: [{ name: 'billing__accounts_get', arguments: { accountId: account }, callId: `read-${account}` }] },
        { toolCalls: [propose(account, evidence(`read-${account}`))] },
        { text: 'Done.' },
      ]),
    );
  const profile = (r: string) => ({ version: '1', route: r, prompt: AUTHOR_PROMPT, reads: ['billing/accounts.get'], auditor: 'auditor' });
  const scope = { reads: ['billing'], writes: ['writes__propose', 'billing'], forbidden: [] };
  config = {
    ...fleetConfig(),
    routes: {
      cited: writer('acct-ev1', (id) => [id]),
      unknown: writer('acct-ev2', () => ['no-such-call', '01a22950-1893-7572-9384-43fcdddac799']),
      crash: writer('acct-ev3', (id) => [id]),
      auditor: { adapter: 'openai', model: 'auditor-model', baseUrl: provider.baseUrl },
    },
    profiles: {
      cited: profile('cited'),
      unknown: profile('unknown'),
      crash: profile('crash'),
      auditor: { version: '1', route: 'auditor', prompt: 'You audit write packets.', reads: ['billing/accounts.get'] },
    },
    caseTypes: {
      cited: { rootProfile: 'cited', scope },
      unknown: { rootProfile: 'unknown', scope },
      crash: { rootProfile: 'crash', scope },
    },
    connectors: {
      billing: {
        kind: 'http',
        target: BILLING,
        baseUrl: f.target.baseUrl,
        timeoutMs: 3000,
        receipts: { path: '/receipts/{idempotencyKey}', conclusive: true },
        operations: {
          'accounts.get': { access: 'read', method: 'GET', path: '/accounts/{accountId}', params: { accountId: { type: 'string', maxLength: 64, pattern: '[a-z0-9-]+' } } },
          'accounts.credit': {
            access: 'write',
            effectClass: 'payment',
            method: 'POST',
            path: '/accounts/{accountId}/credit',
            body: { amountCents: '{{amountCents}}' },
            params: { accountId: { type: 'string', maxLength: 64, pattern: '[a-z0-9-]+' }, amountCents: { type: 'integer', minimum: 1, maximum: 1_000_000 } },
            impactKeys: ['billing:test:{accountId}'],
          },
        },
      },
    },
    runtime: { leaseTtlMs: 2000, sweepIntervalMs: 200 },
  } as FleetConfig;
  writeFileSync(join(f.dir, 'evidence.json'), JSON.stringify(config, null, 2));
});

afterAll(async () => {
  await f?.close();
  await provider?.close();
});

const env = () => ({ EVERDICT_CONFIG: join(f.dir, 'evidence.json') });
const open = (caseType: string) => openTestCase(f.store, config, { caseType, originKey: `evidence-${caseType}-${Math.random()}`, objective: OBJECTIVE });
const reads = (account: string) => f.target.requests.filter((r) => r.method === 'GET' && r.url === `/api/accounts/${account}`);

interface Row {
  id: string;
  turn: number;
  ordinal: number;
  kind: string;
  tool_name: string | null;
  status: string;
  response: string | null;
}
async function rows(taskId: string): Promise<Row[]> {
  const { rows } = await f.db.query<Row>({
    text: `SELECT c.id, c.turn, c.ordinal, c.kind, c.tool_name, c.status, convert_from(r.bytes, 'UTF8') AS response
             FROM runtime_calls c LEFT JOIN papers p ON p.id = c.response_paper_id LEFT JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
            WHERE c.task_id = $1::uuid AND c.ordinal > 0 ORDER BY c.turn, c.ordinal`,
    values: [taskId],
  });
  return rows;
}
const content = (r: Row) => (JSON.parse(r.response!) as { content: string; outcome: string }).content;

async function openGate(caseId: string) {
  return eventually(
    async () =>
      (
        await f.db.query<{ id: string; packet_digest: string; packet_paper_id: string }>({
          text: `SELECT id, packet_digest, packet_paper_id FROM gates WHERE case_id = $1::uuid AND state = 'open'`,
          values: [caseId],
        })
      ).rows[0],
    { timeoutMs: 40_000, what: `open gate of case ${caseId}` },
  );
}
async function taskState(taskId: string) {
  return (await f.db.query<{ state: string }>({ text: 'SELECT state FROM tasks WHERE id = $1::uuid', values: [taskId] })).rows[0]?.state;
}
/** The user message and the tools of one recorded auditor request. */
function auditorRequest(i: number) {
  const body = provider.received[i]!.body as { messages: { role: string; content: string | null }[]; tools?: { function: { name: string } }[] };
  return { body, raw: JSON.stringify(body), tools: (body.tools ?? []).map((t) => t.function.name) };
}

describe('evidence with provenance', () => {
  let node: ServiceProc;

  it('the auditor sees the cited read with its provenance and none of the author; its own read is journalled once; the packet carries the citation', async () => {
    node = await f.start({ services: SERVICES, env: env() });
    const sent = provider.received.length;
    provider.reply(auditorReads('acct-ev1'), approve);
    const { caseId, taskId } = await open('cited');
    const gate = await openGate(caseId);

    // The author's read: a completed journal row the citation resolved to.
    const all = await rows(taskId);
    const authorRead = all.find((r) => r.turn === 0 && r.ordinal === 1)!;
    expect(authorRead).toMatchObject({ kind: 'read', tool_name: 'billing__accounts_get', status: 'completed' });
    const result = (JSON.parse(content(authorRead)) as { result: unknown }).result;

    // What the auditor was asked first: the packet and the evidence, with provenance.
    expect(provider.received.length - sent).toBe(2);
    const first = auditorRequest(sent);
    const user = first.body.messages.filter((m) => m.role === 'user');
    expect(user).toHaveLength(1);
    const subject = JSON.parse(user[0]!.content!) as { packet: Record<string, unknown>; evidence: { citation: unknown; provenance: Record<string, unknown>; content: unknown }[] };
    expect(subject.evidence).toEqual([
      {
        citation: { kind: 'call', ref: authorRead.id, tool: 'billing__accounts_get', contentHash: payloadHash(result) },
        provenance: expect.objectContaining({
          source: 'journal_call',
          callId: authorRead.id,
          tool: 'billing__accounts_get',
          origin: { connector: 'billing', operation: 'accounts.get', target: BILLING },
          trust: 'external',
          dataClass: 'estate',
          contentHash: payloadHash(result),
          truncated: false,
        }),
        content: result,
      },
    ]);
    expect(subject.evidence[0]!.provenance['bytes']).toBeGreaterThan(0);
    // Nothing of the author: not its prompt, not the case objective, not its conversation.
    expect(first.raw).not.toContain('AUTHOR-PROMPT-7f3a');
    expect(first.raw).not.toContain('OBJECTIVE-91c2');
    expect(first.raw).not.toContain('read-acct-ev1');
    expect(first.body.messages.map((m) => m.role)).toEqual(['system', 'user']);
    // Its own read tool is offered; after the read, the result came back to it.
    expect(first.tools).toEqual(['billing__accounts_get']);
    const second = auditorRequest(sent + 1);
    expect(second.body.messages.map((m) => m.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    expect(second.raw).toContain('balanceCents');

    // The auditor's read: one journal row under the proposing task's turn, one request at the target.
    const auditRows = (await rows(taskId)).filter((r) => r.ordinal >= 1_000_000);
    expect(auditRows.map((r) => [r.turn, r.kind, r.tool_name, r.status])).toEqual([[1, 'read', 'billing__accounts_get', 'completed']]);
    expect(reads('acct-ev1')).toHaveLength(2); // the author's read and the auditor's

    // The packet in the gate carries the citation, and the digest covers it.
    const { rows: paper } = await f.db.query<{ bytes: Buffer }>({
      text: 'SELECT r.bytes FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE p.id = $1::uuid',
      values: [gate!.packet_paper_id],
    });
    const packet = JSON.parse(paper[0]!.bytes.toString('utf8')) as Record<string, unknown>;
    expect(packet['evidence']).toEqual([{ kind: 'call', ref: authorRead.id, tool: 'billing__accounts_get', contentHash: payloadHash(result) }]);
    expect(packet['digest']).toBe(gate!.packet_digest);
    // The case's ledger records what was cited and what the auditor read itself.
    const proposed = (await f.ledger(caseId)).find((l) => l.kind === 'effect_proposed')!;
    expect(proposed.body).toMatchObject({ evidence: packet['evidence'], audit: { verdict: 'approve', by: 'auditor@1', reads: [auditRows[0]!.id] } });

    // Approved, the write executes once.
    const decided = await f.decide(node.port, TOKENS.bob, gate!.id, { decision: 'HW-payment', verdict: 'approve', digest: gate!.packet_digest });
    expect(decided.status, JSON.stringify(decided.body)).toBe(201);
    await eventually(async () => (await taskState(taskId)) === 'done', { timeoutMs: 40_000, what: 'writer done' });
    expect(f.target.applies.get('acct-ev1')).toBe(1);

    // Every message of the case is labelled by where its content came from.
    const { rows: sentMessages } = await f.db.query<{ type: string; body: Buffer }>({ text: 'SELECT type, body FROM outbox_messages WHERE case_id = $1::uuid ORDER BY seq', values: [caseId] });
    const labels = new Map<string, Set<string>>();
    for (const m of sentMessages) labels.set(m.type, (labels.get(m.type) ?? new Set()).add((JSON.parse(m.body.toString('utf8')) as { trust: string }).trust));
    expect(labels.get('gate.requested')).toEqual(new Set(['agent'])); // the packet the model proposed
    expect(labels.get('task.finished')).toEqual(new Set(['agent'])); // the model's report
    expect(labels.get('effect.outcome')).toEqual(new Set(['external'])); // the target's receipt
    expect(labels.get('gate.decided')).toEqual(new Set(['platform']));
    expect(labels.get('task.runnable')).toEqual(new Set(['platform']));
  });

  it('a citation that names no read of the task is refused to the model, naming the field; the auditor is never asked', async () => {
    const sent = provider.received.length;
    const { caseId, taskId } = await open('unknown');
    await eventually(async () => (await taskState(taskId)) === 'done', { timeoutMs: 40_000, what: 'task done' });
    const proposal = (await rows(taskId)).find((r) => r.tool_name === 'writes__propose')!;
    const told = JSON.parse(proposal.response!) as { content: string; outcome: string };
    expect(told.outcome).toBe('tool_error');
    expect(told.content).toMatch(/^Proposal refused before audit: evidence\[0\] \("no-such-call"\) names no call of this task; evidence\[1\] .* names no call of this task\.$/);
    expect(provider.received.length).toBe(sent);
    const { rows: gates } = await f.db.query({ text: 'SELECT id FROM gates WHERE case_id = $1::uuid', values: [caseId] });
    expect(gates).toHaveLength(0);
  });

  it('a turn-worker SIGKILLed mid-audit after its read completed: the resumed audit replays the read, the target sees it once', async () => {
    const sent = provider.received.length;
    // The auditor asks for a read; its verdict is slow to come: the worker dies meanwhile.
    provider.reply(auditorReads('acct-ev3'), { ...approve, delayMs: 60_000 });
    const { caseId, taskId } = await open('crash');
    await eventually(async () => ((await rows(taskId)).some((r) => r.ordinal >= 1_000_000 && r.status === 'completed') ? true : undefined), { timeoutMs: 40_000, what: 'auditor read journalled' });
    await eventually(async () => provider.received.length - sent >= 2, { timeoutMs: 20_000, what: 'auditor asked for its verdict' });
    expect(reads('acct-ev3')).toHaveLength(2);
    await node.kill('SIGKILL');

    // A new worker resumes the turn: the proposal and its audit run again.
    provider.reply(auditorReads('acct-ev3'), approve);
    node = await f.start({ services: SERVICES, env: env() });
    await openGate(caseId);
    expect(provider.received.length - sent).toBe(4);
    expect(auditorRequest(sent + 3).raw).toContain('balanceCents'); // the replayed result reached the auditor
    expect(reads('acct-ev3')).toHaveLength(2); // no second auditor read, no second author read
    const auditRows = (await rows(taskId)).filter((r) => r.ordinal >= 1_000_000);
    expect(auditRows.map((r) => [r.kind, r.status])).toEqual([['read', 'completed']]);
  });
});
