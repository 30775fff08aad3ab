/**
 * Connector reads across a turn-worker SIGKILL (issue 11), on real processes: one model response
 * calls, in recorded order, two independent reads (a REAL target HTTP service and a reviewed
 * template of a REAL Postgres estate: one parallel batch), a sequential built-in read `step`
 * and another HTTP read — three batches. The worker is killed by a crash point, a second worker
 * resumes the task, and the task completes.
 *
 *  - `after_read_batch:2`: the third batch's intent was committed together with the outcomes of
 *    the first two batches. Those reads are completed in the journal at the kill; on resume they
 *    are replayed and never run again — the target saw each HTTP read exactly once, the estate
 *    read and `step` started exactly once (the tool trace of both workers) — and only the open
 *    intent runs, under its original call id. `step`'s result is too long to inline: the paper
 *    its outcome cites was written with it, before the kill, and exactly once.
 *  - `after_response:1`: the response and the first batch's intents are durable, nothing ran;
 *    on resume every read runs exactly once.
 * In both the model is asked once per turn: the recorded response is replayed.
 */
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetConfig } from '@everdict/contracts';
import { toolTrace } from '@everdict/testkit';
import { modelAsks, openTestCase } from '../turns/helpers.js';
import { agentConnectors, crashLog, effectsFixture, eventually, fleetConfig, type EffectsFixture, type ServiceProc } from './helpers.js';

let f: EffectsFixture;
let config: FleetConfig;
let configPath: string;
let modelLog: string;
let crashes: string;
/** Every turn-worker this file started (their whole output is the tool trace). */
const workers: ServiceProc[] = [];

/** Longer than the kernel inlines (8000 chars): `step` echoes it, so its result is offloaded (K6). */
const LONG_NOTE = 'the account and the entries; '.repeat(320);

/** The reads of one case: billing `first`, estate entry `entry`, step, billing `second`. */
const readsOf = (first: string, entry: string, second: string) => [
  { name: 'billing__accounts_get', arguments: { accountId: first } },
  { name: 'estate__entries_count', arguments: { entryId: entry } },
  { name: 'step', arguments: { after: LONG_NOTE } },
  { name: 'billing__accounts_get', arguments: { accountId: second } },
];

beforeAll(async () => {
  f = await effectsFixture('effects_reads_crash');
  for (const a of ['acct-b1', 'acct-b2', 'acct-r1', 'acct-r2']) f.target.balances.set(a, 100);
  await f.estate.pool.query("INSERT INTO entries (entry_id, account, amount) VALUES ('e-b', 'acct-b1', 7), ('e-r', 'acct-r1', 5)");
  const script = (name: string, reads: unknown[]) => {
    writeFileSync(join(f.dir, `${name}.json`), JSON.stringify({ steps: [{ toolCalls: reads }, { text: 'All read.' }] }));
    return { adapter: 'scripted' as const, model: 'scripted', scriptPath: `${name}.json` };
  };
  const profile = (route: string) => ({ version: '1', route, prompt: 'You read before you answer.', reads: ['billing/accounts.get', 'estate/entries.count'], tools: ['step'] });
  const scope = { reads: 'all' as const, writes: [], forbidden: [] };
  const base = fleetConfig();
  config = {
    ...base,
    routes: { batches: script('batches', readsOf('acct-b1', 'e-b', 'acct-b2')), response: script('response', readsOf('acct-r1', 'e-r', 'acct-r2')) },
    // A read that is not independent: a batch of its own, run in recorded order.
    tools: { step: { builtin: 'echo', description: 'Record a step of the reading.', independent: false } },
    profiles: { batches: profile('batches'), response: profile('response') },
    caseTypes: { batches: { rootProfile: 'batches', scope }, response: { rootProfile: 'response', scope } },
    // The fixture's connectors (billing `accounts.get`, estate `entries.count`), declared once.
    connectors: agentConnectors(),
    runtime: { leaseTtlMs: 1500, sweepIntervalMs: 200 },
  };
  configPath = join(f.dir, 'reads-crash.json');
  writeFileSync(configPath, JSON.stringify(config, null, 2));
  modelLog = join(f.dir, 'model.log');
  crashes = join(f.dir, 'crash.log');
});

afterAll(async () => f?.close());

const worker = async (env: Record<string, string> = {}) => {
  const w = await f.start({ services: ['turn-worker'], mayCrash: true, env: { EVERDICT_CONFIG: configPath, EVERDICT_MODEL_LOG: modelLog, EVERDICT_CRASH_LOG: crashes, LOG_LEVEL: 'debug', ...env } });
  workers.push(w);
  return w;
};

interface CallRow {
  id: string;
  ordinal: number;
  tool_name: string;
  status: string;
}

const calls = async (taskId: string) =>
  (await f.db.query<CallRow>({ text: 'SELECT id, ordinal, tool_name, status FROM runtime_calls WHERE task_id = $1::uuid AND turn = 0 AND ordinal > 0 ORDER BY ordinal', values: [taskId] })).rows;

const state = async (taskId: string) => (await f.db.query<{ state: string }>({ text: 'SELECT state FROM tasks WHERE id = $1::uuid', values: [taskId] })).rows[0]?.state;

/** Executions of `tool` for `taskId` seen by every worker so far (a SIGKILLed one's included). */
const started = (taskId: string, tool: string) =>
  workers
    .flatMap((w) => toolTrace(w.output()))
    .filter((e) => e.event === 'started' && e.taskId === taskId && e.tool === tool)
    .map((e) => e.callId);

/** Opens a case under `caseType` with a worker that dies at `point`, and waits for the kill. */
async function killedAt(caseType: string, point: string): Promise<{ caseId: string; taskId: string }> {
  const victim = await worker({ EVERDICT_CRASHPOINT: point });
  const opened = await openTestCase(f.store, config, { caseType, originKey: `reads-crash-${caseType}-${Math.random()}`, objective: 'read, then answer' });
  const died = await Promise.race([victim.exited, new Promise<null>((r) => setTimeout(() => r(null), 30_000))]);
  expect(died, `the worker reached ${point}:\n${victim.output().slice(-3000)}`).toMatchObject({ signal: 'SIGKILL' });
  expect(crashLog(crashes).filter((c) => (c as { taskId?: string }).taskId === opened.taskId).map((c) => c.point)).toEqual([point.split(':')[0]]);
  return opened;
}

async function resume(taskId: string): Promise<void> {
  const w = await worker();
  await eventually(async () => (await state(taskId)) === 'done', { timeoutMs: 30_000, what: `task ${taskId} done after the restart` });
  await w.kill('SIGTERM');
}

describe('connector reads across a turn-worker SIGKILL', () => {
  it('killed after a read batch was journalled: no completed read runs again on resume; the open one runs once', async () => {
    const { caseId, taskId } = await killedAt('batches', 'after_read_batch:2');

    // At the kill, the first two batches are completed in the journal and the third is an intent.
    const atKill = await calls(taskId);
    expect(atKill.map((c) => [c.ordinal, c.tool_name, c.status])).toEqual([
      [1, 'billing__accounts_get', 'completed'],
      [2, 'estate__entries_count', 'completed'],
      [3, 'step', 'completed'],
      [4, 'billing__accounts_get', 'intent'],
    ]);
    expect(f.target.touching('acct-b2')).toHaveLength(0);
    // The offloaded result the completed `step` cites is durable with it.
    const resultPapers = async () =>
      (await f.db.query<{ n: number }>({ text: 'SELECT count(*)::int AS n FROM papers WHERE case_id = $1::uuid AND name = $2::text', values: [caseId, `results/${taskId}/result:${atKill[2]!.id}`] })).rows[0]!.n;
    expect(await resultPapers()).toBe(1);

    await resume(taskId);
    expect(await resultPapers()).toBe(1);
    const after = await calls(taskId);
    expect(after.map((c) => [c.id, c.status])).toEqual(atKill.map((c) => [c.id, 'completed']));

    // The target saw each HTTP read once; the estate read and `step` ran once, under their ids.
    expect(f.target.touching('acct-b1')).toHaveLength(1);
    expect(f.target.touching('acct-b2')).toHaveLength(1);
    expect(started(taskId, 'estate__entries_count')).toEqual([atKill[1]!.id]);
    expect(started(taskId, 'step')).toEqual([atKill[2]!.id]);
    expect(started(taskId, 'billing__accounts_get').sort()).toEqual([atKill[0]!.id, atKill[3]!.id].sort());

    // The response was replayed, never asked again.
    expect(modelAsks(modelLog).filter((a) => a.taskId === taskId).map((a) => a.turn)).toEqual([0, 1]);
    expect(await f.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });

  it('killed after the response (intents durable, nothing ran): on resume each read runs exactly once', async () => {
    const { caseId, taskId } = await killedAt('response', 'after_response:1');

    const atKill = await calls(taskId);
    expect(atKill.map((c) => [c.ordinal, c.tool_name, c.status])).toEqual([
      [1, 'billing__accounts_get', 'intent'],
      [2, 'estate__entries_count', 'intent'],
    ]);
    expect(f.target.touching('acct-r1')).toHaveLength(0);

    await resume(taskId);
    const after = await calls(taskId);
    expect(after.map((c) => [c.ordinal, c.status])).toEqual([
      [1, 'completed'],
      [2, 'completed'],
      [3, 'completed'],
      [4, 'completed'],
    ]);
    // The intents written before the kill were run under their ids.
    expect(after.slice(0, 2).map((c) => c.id)).toEqual(atKill.map((c) => c.id));
    expect(f.target.touching('acct-r1')).toHaveLength(1);
    expect(f.target.touching('acct-r2')).toHaveLength(1);
    expect(started(taskId, 'estate__entries_count')).toEqual([after[1]!.id]);
    expect(started(taskId, 'step')).toEqual([after[2]!.id]);
    expect(modelAsks(modelLog).filter((a) => a.taskId === taskId).map((a) => a.turn)).toEqual([0, 1]);
    expect(await f.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });
});
