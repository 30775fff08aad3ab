/**
 * The case lifecycle (issue 13 item 1, seed 004 §11.1), against real services in one real
 * process (intake, turn-worker, gate, coordinator, reconciler), real Postgres and RabbitMQ:
 *
 *  - a scripted agent's write case goes opened → running → at_gate → held → running → resolved,
 *    each change a `case_state` ledger record (from, to, cause) in a consistent chain, and
 *    `cases.state` reads the last one; the resolved case has every effect applied and verified;
 *  - a case whose root finished without its write (the gate rejected) is NOT resolved: it
 *    stays `parked` (class `unreconciled`) and its record says why;
 *  - a case whose root waits on a question reads `parked` with its reason class and age;
 *  - a hard cancel reads `cancelled` at once (written with the stop);
 *  - `everdict cases --state resolved|cancelled|parked` lists exactly those; an unknown state
 *    is a 400 naming the field; the `--before` the CLI prints pages on.
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetConfig } from '@everdict/contracts';
import { openTestCase } from '../turns/helpers.js';
import { REPO, TOKENS, agentConnectors, proposeCredit as credit, effectsFixture, eventually, fleetConfig, type EffectsFixture, type ServiceProc } from './helpers.js';

let f: EffectsFixture;
let node: ServiceProc;
let config: FleetConfig;

const QUESTION = { gap: 'which account', checked: 'the ticket', dependsOn: 'the credit', alternatives: ['a', 'b'], decisionNeeded: 'pick the account' };

function script(name: string, steps: unknown[]): string {
  writeFileSync(join(f.dir, `${name}.json`), JSON.stringify({ steps }));
  return `${name}.json`;
}

beforeAll(async () => {
  f = await effectsFixture('case_lifecycle');
  const base = fleetConfig();
  const route = (file: string) => ({ adapter: 'scripted' as const, model: 'scripted', scriptPath: file });
  const profile = (r: string) => ({ version: '1', route: r, prompt: 'You act on billing tickets.', auditor: 'auditor' });
  const scope = { reads: 'all' as const, writes: ['writes__propose', 'billing'], forbidden: [] };
  config = {
    ...base,
    routes: {
      writer: route(script('writer', [{ toolCalls: [credit('acct-life', 900)] }, { text: 'Credited.' }])),
      refused: route(script('refused', [{ toolCalls: [credit('acct-refused', 100)] }, { text: 'The gate refused.' }])),
      asker: route(script('asker', [{ toolCalls: [{ name: 'wait', arguments: { for: 'question', reason: 'need a decision', question: QUESTION } }] }, { text: 'answered' }])),
      auditor: route(script('auditor', [{ text: '{"verdict": "approve", "reason": "amount and account match the cited ticket"}' }])),
    },
    profiles: { writer: profile('writer'), refused: profile('refused'), asker: profile('asker'), auditor: { version: '1', route: 'auditor', prompt: 'You audit write packets.' } },
    caseTypes: { writer: { rootProfile: 'writer', scope }, refused: { rootProfile: 'refused', scope }, asker: { rootProfile: 'asker', scope } },
    connectors: agentConnectors(),
  };
  writeFileSync(join(f.dir, 'lifecycle.json'), JSON.stringify(config, null, 2));
  node = await f.start({ services: ['intake', 'turn-worker', 'gate', 'execution-coordinator', 'reconciler'], env: { EVERDICT_CONFIG: join(f.dir, 'lifecycle.json') } });
});

afterAll(async () => {
  await f?.close();
});

const open = (caseType: string) => openTestCase(f.store, config, { caseType, originKey: `life-${caseType}-${Math.random()}`, objective: 'handle the ticket' });

async function caseRow(caseId: string) {
  const { rows } = await f.db.query<{ state: string; state_reason: string | null; state_since: Date }>({ text: 'SELECT state, state_reason, state_since FROM cases WHERE id = $1::uuid', values: [caseId] });
  return rows[0]!;
}

const waitState = (caseId: string, state: string) =>
  eventually(async () => ((await caseRow(caseId)).state === state ? true : undefined), { timeoutMs: 30_000, what: `case ${caseId} ${state}` });

async function transitions(caseId: string) {
  return (await f.ledger(caseId)).filter((l) => l.kind === 'case_state').map((l) => l.body as { from: string; to: string; cause: string; reason: string | null });
}

function everdict(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', 'cli/src/main.ts', ...args],
      { cwd: REPO, env: { ...process.env, EVERDICT_URL: `http://127.0.0.1:${node.port}`, EVERDICT_GATE_URL: `http://127.0.0.1:${node.port}`, EVERDICT_TOKEN: TOKENS.alice }, timeout: 60_000 },
      (err, stdout, stderr) => done({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** Case ids in a `cases --json` answer. */
async function listed(state: string): Promise<string[]> {
  const r = await everdict('cases', '--state', state, '--json');
  expect(r.code, r.stderr).toBe(0);
  return (JSON.parse(r.stdout) as { cases: { caseId: string }[] }).cases.map((c) => c.caseId);
}

/** `seq` appears in `all` in order (other states may come between). */
function inOrder(all: readonly string[], seq: readonly string[]): boolean {
  let i = 0;
  for (const s of all) if (s === seq[i]) i++;
  return i === seq.length;
}

describe('the case lifecycle', () => {
  let resolved: string;
  let unreconciled: string;
  let parked: string;
  let cancelled: string;

  it('a write case goes opened → running → at_gate → held → running → resolved, each change a ledger record', async () => {
    const { caseId } = await open('writer');
    resolved = caseId;
    const gate = await eventually(
      async () => {
        const { rows } = await f.db.query<{ id: string; packet_digest: string }>({ text: "SELECT id, packet_digest FROM gates WHERE case_id = $1::uuid AND state = 'open'", values: [caseId] });
        return rows[0];
      },
      { timeoutMs: 30_000, what: 'the gate open' },
    );
    await waitState(caseId, 'at_gate');
    const decided = await f.decide(node.port, TOKENS.bob, gate.id, { decision: 'HW-payment', verdict: 'approve', digest: gate.packet_digest });
    expect(decided.status, JSON.stringify(decided.body)).toBe(201);
    await waitState(caseId, 'resolved');
    expect(f.target.applies.get('acct-life')).toBe(1);

    const t = await transitions(caseId);
    const states = ['opened', ...t.map((x) => x.to)];
    expect(inOrder(states, ['opened', 'running', 'at_gate', 'held', 'running', 'resolved']), states.join(' → ')).toBe(true);
    // One chain: each record starts where the previous one ended; the row reads the last one.
    t.forEach((x, i) => expect(x.from).toBe(i === 0 ? 'opened' : t[i - 1]!.to));
    expect(t.find((x) => x.to === 'at_gate')).toMatchObject({ cause: 'gate_opened', gateId: gate.id });
    expect(t.find((x) => x.to === 'held')).toMatchObject({ cause: 'gate_approved', gateId: gate.id });
    // The finished root waits to tell the customer; the recorded delivery resolves the case.
    expect(t.at(-2)).toMatchObject({ to: 'parked', reason: 'telling_customer', cause: 'task_done' });
    expect(t.at(-1)).toMatchObject({ to: 'resolved', cause: 'customer_told' });
    expect((await caseRow(caseId)).state).toBe('resolved');
    expect(await f.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });

  it('a root done without its write (gate rejected) keeps the case parked `unreconciled`, and says why', async () => {
    const { caseId, taskId } = await open('refused');
    unreconciled = caseId;
    const gate = await eventually(
      async () => (await f.db.query<{ id: string; packet_digest: string }>({ text: "SELECT id, packet_digest FROM gates WHERE case_id = $1::uuid AND state = 'open'", values: [caseId] })).rows[0],
      { timeoutMs: 30_000, what: 'the gate open' },
    );
    const r = await f.decide(node.port, TOKENS.bob, gate.id, { decision: 'HW-payment', verdict: 'reject', digest: gate.packet_digest, reason: 'not this account' });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    await eventually(async () => ((await f.db.query<{ state: string }>({ text: 'SELECT state FROM tasks WHERE id = $1::uuid', values: [taskId] })).rows[0]?.state === 'done' ? true : undefined), {
      timeoutMs: 30_000,
      what: 'the root done',
    });
    expect(await caseRow(caseId)).toMatchObject({ state: 'parked', state_reason: 'unreconciled' });
    const last = (await transitions(caseId)).at(-1) as Record<string, unknown>;
    expect(last).toMatchObject({ to: 'parked', reason: 'unreconciled', cause: 'task_done' });
    expect(last['why']).toEqual([expect.stringMatching(/1 proposed write\(s\) refused, rejected or lapsed/)]);
    expect(f.target.applies.get('acct-refused')).toBeUndefined();
  });

  it('a case waiting on a question reads parked with its reason class; a hard cancel reads cancelled', async () => {
    parked = (await open('asker')).caseId;
    cancelled = (await open('asker')).caseId;
    await waitState(parked, 'parked');
    await waitState(cancelled, 'parked');
    expect(await caseRow(parked)).toMatchObject({ state: 'parked', state_reason: 'question' });

    const r = await f.post(node.port, TOKENS.alice, `/v1/cases/${cancelled}/cancel`, { mode: 'hard' });
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    // Written with the stop itself: no wait.
    expect((await caseRow(cancelled)).state).toBe('cancelled');
    expect((await transitions(cancelled)).at(-1)).toMatchObject({ from: 'parked', to: 'cancelled', cause: 'case_hard_cancel' });
  });

  it('everdict cases --state lists exactly the cases in that state; parked shows reason and age; --before pages on', async () => {
    expect(await listed('resolved')).toEqual([resolved]);
    expect(await listed('cancelled')).toEqual([cancelled]);
    expect((await listed('parked')).sort()).toEqual([parked, unreconciled].sort());
    const human = await everdict('cases', '--state', 'parked');
    expect(human.stdout).toMatch(new RegExp(`${parked}\\s+asker\\s+parked:question \\d+[smhd]`));
    expect(human.stdout).toMatch(new RegExp(`${unreconciled}\\s+refused\\s+parked:unreconciled \\d+[smhd]`));

    const bad = await f.get(node.port, TOKENS.alice, '/v1/cases?state=open');
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ field: 'state' });

    const first = await everdict('cases', '--limit', '1');
    expect(first.code, first.stderr).toBe(0);
    const before = /--before (\S+)\)/.exec(first.stdout)?.[1];
    expect(before, first.stdout).toBeDefined();
    const next = await everdict('cases', '--limit', '1', '--before', before!);
    expect(next.code, next.stderr).toBe(0);
    expect(next.stdout).not.toContain(before!);
    expect(next.stdout).toMatch(/[0-9a-f-]{36}/);
  });
});
