/**
 * Acceptance, the crash matrix: a turn-worker process is SIGKILLed at each journal
 * point — after the intent before the model call, after the model call before its response is
 * persisted, after the response before tool results, after tool results before the commit,
 * after the commit before the ack — five times per point, while a second worker keeps running.
 * Every case completes; no checkpoint is skipped; no completed read runs again; the model is
 * re-asked only for a turn whose response was never persisted; every ledger verifies; every case's
 * state reads what its finished root makes it, each change recorded once. Reads are
 * observed through the workers' tool trace (LOG_LEVEL=debug, `tool started` lines on stdout):
 * written at execution time, outside the turn's unit of work, and kept across a SIGKILL.
 *
 * The agent's turns take both commit shapes (services/turn-worker/src/durability.ts): a turn
 * that reads the knowledge base (a stdio MCP server, observable) journals its intents before
 * they run; a batch of the in-process `note` alone, with no journalled outcome waiting on it, is
 * folded into the turn's next write (its C3, or the C2 of a kb batch after it), so a worker
 * killed before that write may have run a `note` the journal never saw — the one execution
 * allowed without a journal row, and only by a killed worker.
 */
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CRASH_POINTS } from '@everdict/turn-worker';
import { recordStream, toolTrace } from '@everdict/testkit';
import { call, eventually, modelAsks, REPO, say, testConfig, turnsFixture, type TurnsFixture, type WorkerProc } from './helpers.js';

const KILLS_PER_POINT = 5;
const TURNS = 5;
const KB = join(REPO, 'test/turns/fixtures/kb-mcp.mjs');
/** Turns (from 0) whose `note` batch is folded into the turn's next write (C3, or turn 2's second C2). */
const FOLDED_NOTES = [1, 2, 3];
/** Read executions each case completes: kb + note, note, note + kb, note. */
const READS_PER_CASE = 6;

describe('crash matrix: SIGKILL at every journal point, with a second worker running', () => {
  let fx: TurnsFixture;
  let steady: WorkerProc;
  let modelLog: string;
  let crashLog: string;
  /** Each worker's whole stdout since it started (the fixture keeps only a tail), and whether it was a victim. */
  const outputs: { victim: boolean; text: () => string }[] = [];
  const traced = async (name: string, env: Record<string, string>): Promise<WorkerProc> => {
    const w = await fx.worker(name, { LOG_LEVEL: 'debug', ...env });
    outputs.push({ victim: env.EVERDICT_CRASHPOINT !== undefined, text: recordStream(w.proc.stdout!, w.output()) });
    return w;
  };
  beforeAll(async () => {
    fx = await turnsFixture('turns_crash', {
      ...testConfig({
        routes: { main: 'main.json' },
        // `note` is not independent: turn 0's [kb__lookup, note] are two batches (after_read_batch).
        tools: { note: { builtin: 'echo', description: 'Note a step.', independent: false } },
        profiles: { agent: { version: '1', route: 'main', prompt: 'You answer tickets.', tools: ['note'], mcp: [{ server: 'kb', tools: { lookup: { access: 'read' } } }] } },
        runtime: { leaseTtlMs: 1500, sweepIntervalMs: 200 },
      }),
      mcpServers: { kb: { transport: 'stdio', command: process.execPath, args: [KB], timeoutMs: 5000 } },
    });
    // Turn 0 journals both batches before they run (the note's C2 carries the kb outcome); turns
    // 1 and 3 fold their note into C3; turn 2 folds its note into the C2 of the kb batch after it.
    fx.writeScript('main', [call(['kb__lookup', { page: 0 }], ['note', { page: 0 }]), call(['note', { page: 1 }]), call(['note', { page: 2 }], ['kb__lookup', { page: 2 }]), call(['note', { page: 3 }]), say('resolved')]);
    modelLog = join(fx.dir, 'model.log');
    crashLog = join(fx.dir, 'crash.log');
    steady = await traced('steady', { EVERDICT_MODEL_LOG: modelLog });
  }, 60_000);
  afterAll(async () => fx?.close());

  it('survives a kill at every crash point, KILLS_PER_POINT times each, with every invariant intact', async () => {
    const cases: { caseId: string; taskId: string }[] = [];
    const open = async (n: number) => {
      for (let i = 0; i < n; i++) cases.push(await fx.openCase('ticket', `ticket ${cases.length}`));
    };
    await open(2);
    for (const point of CRASH_POINTS) {
      for (let k = 0; k < KILLS_PER_POINT; k++) {
        // Vary which arrival dies, so kills land on different turns (and, for after_commit, on
        // claims as well as on turn commits).
        const nth = point === 'after_commit' ? k + 1 : (k % 3) + 1;
        const victim = await traced(`victim-${point}-${k}`, { EVERDICT_CRASHPOINT: `${point}:${nth}`, EVERDICT_CRASH_LOG: crashLog, EVERDICT_MODEL_LOG: modelLog });
        // Feed work until the victim reaches its point and dies (the steady worker takes some too).
        for (let round = 0; ; round++) {
          await open(2);
          const died = await Promise.race([victim.exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 2500))]);
          if (died) break;
          if (round > 12) throw new Error(`victim never reached ${point}:\n${victim.output().slice(-3000)}`);
        }
        expect((await victim.exited).signal).toBe('SIGKILL');
      }
    }

    await eventually(
      async () => (await fx.rows<{ n: number }>("SELECT count(*)::int AS n FROM tasks WHERE state <> 'done'"))[0]!.n === 0,
      { timeoutMs: 60_000, intervalMs: 250, what: 'every case done' },
    ).catch(async (e: unknown) => {
      const stuck = await fx.rows("SELECT id, state, park_reason, park_detail, lease_owner, lease_until FROM tasks WHERE state <> 'done'");
      throw new Error(`${String(e)}\n${JSON.stringify(stuck, null, 1)}\n${steady.output().slice(-4000)}`);
    });

    // Each point really fired five times.
    const kills = existsSync(crashLog) ? readFileSync(crashLog, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { point: string; pid: number; taskId?: string; turn?: number; claim?: boolean }) : [];
    for (const point of CRASH_POINTS) expect(kills.filter((k) => k.point === point).length, point).toBe(KILLS_PER_POINT);
    const commitKills = kills.filter((k) => k.point === 'after_commit') as { claim?: boolean }[];
    expect(commitKills.some((k) => k.claim === true), 'a kill after a claim commit, before its ack').toBe(true);
    expect(commitKills.some((k) => k.claim !== true), 'a kill after a turn commit').toBe(true);

    // No checkpoint skipped: every task has one per turn, 1..TURNS.
    const cps = await fx.rows<{ task_id: string; turns: number[] }>('SELECT task_id, array_agg(turn ORDER BY turn) AS turns FROM turn_checkpoints GROUP BY task_id');
    expect(cps).toHaveLength(cases.length);
    for (const c of cps) expect(c.turns, c.task_id).toEqual(Array.from({ length: TURNS }, (_, i) => i + 1));

    // No completed read ran again: every real execution of a read (a `tool started` line, from a
    // living or a killed worker) happened before its call was completed in the journal, under an
    // id the journal allocated before dispatch — except a folded `note` run by a worker killed
    // before its C3, which the journal never saw (it ran again, unobserved, under a new id).
    const reads = outputs.flatMap((o) => toolTrace(o.text()).map((e) => ({ ...e, victim: o.victim }))).filter((e) => e.event === 'started');
    expect(reads.length).toBeGreaterThanOrEqual(cases.length * READS_PER_CASE);
    const journalled = new Map(
      (await fx.rows<{ id: string; status: string; completed_at: Date | null }>('SELECT id, status, completed_at FROM runtime_calls WHERE id = ANY($1::uuid[])', [[...new Set(reads.map((r) => r.callId))]])).map((r) => [r.id, r]),
    );
    for (const r of reads) {
      const c = journalled.get(r.callId);
      if (c === undefined) {
        expect({ tool: r.tool, victim: r.victim, folded: FOLDED_NOTES.includes(r.turn) }, `execution of ${r.callId} has no journal row`).toEqual({ tool: 'note', victim: true, folded: true });
        continue;
      }
      expect(c.status).toBe('completed');
      expect(r.at, `read ${r.callId} ran after it completed`).toBeLessThanOrEqual(c.completed_at!.getTime());
    }
    const completedReads = await fx.rows<{ n: number }>("SELECT count(*)::int AS n FROM runtime_calls WHERE kind = 'read' AND status = 'completed'");
    expect(completedReads[0]!.n).toBe(cases.length * READS_PER_CASE);
    // Each turn took its shape: a folded turn's calls were recorded by the write that settled
    // them; every other read's intent was written before it ran.
    const shapes = await fx.rows<{ turn: number; tool_name: string; at_once: boolean; n: number }>(
      "SELECT turn, tool_name, created_at = completed_at AS at_once, count(*)::int AS n FROM runtime_calls WHERE kind = 'read' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
    );
    expect(shapes).toEqual([
      { turn: 0, tool_name: 'kb__lookup', at_once: false, n: cases.length },
      { turn: 0, tool_name: 'note', at_once: false, n: cases.length },
      { turn: 1, tool_name: 'note', at_once: true, n: cases.length },
      { turn: 2, tool_name: 'kb__lookup', at_once: false, n: cases.length },
      { turn: 2, tool_name: 'note', at_once: true, n: cases.length },
      { turn: 3, tool_name: 'note', at_once: true, n: cases.length },
    ]);

    // The model was re-asked only for a turn whose response was never persisted: every ask came
    // before the turn's one response was persisted, and every ask but the last was made by a
    // worker that was killed before it could persist the answer (a worker holding several turns
    // loses all of their in-memory answers when it dies, whichever turn hit the crash point).
    const asks = modelAsks(modelLog);
    const killedPids = new Set(kills.map((k) => k.pid));
    const perTurn = new Map<string, { pid: number; at: number }[]>();
    for (const a of asks) perTurn.set(`${a.taskId}:${a.turn}`, [...(perTurn.get(`${a.taskId}:${a.turn}`) ?? []), { pid: a.pid, at: a.at }]);
    const modelCalls = await fx.rows<{ task_id: string; turn: number; completed_at: Date; status: string }>("SELECT task_id, turn, completed_at, status FROM runtime_calls WHERE ordinal = 0");
    expect(modelCalls).toHaveLength(cases.length * TURNS);
    let reasked = 0;
    for (const m of modelCalls) {
      const key = `${m.task_id}:${m.turn}`;
      expect(m.status).toBe('completed');
      const turnAsks = (perTurn.get(key) ?? []).sort((x, y) => x.at - y.at);
      expect(turnAsks.length, `asks for ${key}`).toBeGreaterThanOrEqual(1);
      for (const a of turnAsks) expect(a.at, `ask for ${key} after its response was persisted`).toBeLessThanOrEqual(m.completed_at.getTime() + 1);
      for (const a of turnAsks.slice(0, -1)) expect(killedPids.has(a.pid), `re-ask of ${key} although its first asker lived`).toBe(true);
      reasked += turnAsks.length - 1;
    }
    // Each after_model kill lost at least its own answer; nothing else was asked twice.
    expect(reasked).toBeGreaterThanOrEqual(KILLS_PER_POINT);
    expect(reasked).toBeLessThanOrEqual(kills.length);

    for (const c of cases) expect(await fx.store.verifyLedger(c.caseId), c.caseId).toMatchObject({ ok: true });

    // No reference among the rows the turns wrote dangles (they carry no foreign keys, migration
    // 0023: the journal statement writes every referent with or before what names it).
    const dangling = await fx.rows<{ ref: string; n: number }>(`
      SELECT ref, n FROM (
        SELECT 'papers.case_id' AS ref, count(*)::int AS n FROM papers x WHERE NOT EXISTS (SELECT 1 FROM cases y WHERE y.id = x.case_id)
        UNION ALL SELECT 'paper_revisions.paper_id', count(*)::int FROM paper_revisions x WHERE NOT EXISTS (SELECT 1 FROM papers y WHERE y.id = x.paper_id)
        UNION ALL SELECT 'runtime_calls.task_id', count(*)::int FROM runtime_calls x WHERE NOT EXISTS (SELECT 1 FROM tasks y WHERE y.id = x.task_id)
        UNION ALL SELECT 'runtime_calls.request_paper_id', count(*)::int FROM runtime_calls x WHERE x.request_paper_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM papers y WHERE y.id = x.request_paper_id)
        UNION ALL SELECT 'runtime_calls.response_paper_id', count(*)::int FROM runtime_calls x WHERE x.response_paper_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM papers y WHERE y.id = x.response_paper_id)
        UNION ALL SELECT 'turn_checkpoints.task_id', count(*)::int FROM turn_checkpoints x WHERE NOT EXISTS (SELECT 1 FROM tasks y WHERE y.id = x.task_id)
        UNION ALL SELECT 'turn_checkpoints.state_paper_id', count(*)::int FROM turn_checkpoints x WHERE NOT EXISTS (SELECT 1 FROM papers y WHERE y.id = x.state_paper_id)
        UNION ALL SELECT 'ledger.case_id', count(*)::int FROM ledger x WHERE NOT EXISTS (SELECT 1 FROM cases y WHERE y.id = x.case_id)
        UNION ALL SELECT 'cost_ledger.case_id', count(*)::int FROM cost_ledger x WHERE NOT EXISTS (SELECT 1 FROM cases y WHERE y.id = x.case_id)
        UNION ALL SELECT 'cost_ledger.task_id', count(*)::int FROM cost_ledger x WHERE x.task_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tasks y WHERE y.id = x.task_id)
        UNION ALL SELECT 'cost_ledger.call_id', count(*)::int FROM cost_ledger x WHERE x.call_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM runtime_calls y WHERE y.id = x.call_id)
        UNION ALL SELECT 'history_blocks.case_id', count(*)::int FROM history_blocks x WHERE NOT EXISTS (SELECT 1 FROM cases y WHERE y.id = x.case_id)
      ) d WHERE n > 0`);
    expect(dangling).toEqual([]);
    const written = await fx.rows<{ n: number }>('SELECT (SELECT count(*) FROM papers)::int + (SELECT count(*) FROM history_blocks)::int + (SELECT count(*) FROM cost_ledger)::int AS n');
    expect(written[0]!.n).toBeGreaterThan(0);

    // Each case's state was written with the transition that changed it, whatever was killed
    // when: every root finished, so every case left `running` for what a finished root makes it,
    // and its `case_state` records say so, once per change, ending at the state the row reads.
    const states = await fx.rows<{ id: string; state: string; state_reason: string | null; tos: string[] }>(
      `SELECT c.id, c.state, c.state_reason, array_agg(l.body->>'to' ORDER BY l.seq) AS tos
         FROM cases c JOIN ledger l ON l.case_id = c.id AND l.kind = 'case_state' GROUP BY c.id`,
    );
    expect(states).toHaveLength(cases.length);
    for (const s of states) {
      expect(s.tos, s.id).toEqual(['running', s.state]);
      expect({ state: s.state, reason: s.state_reason }, s.id).toEqual({ state: 'parked', reason: 'telling_customer' });
    }
  }, 240_000);
});
