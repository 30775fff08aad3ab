/**
 * The long-history phase of `npm run bench:turns` (BENCH_PHASES=history): what a turn costs once
 * an agent's conversation is long. NOT a test.
 *
 * One turn-worker process runs BENCH_HISTORY_AGENTS (50) agents of BENCH_HISTORY_TURNS (100)
 * turns each; a turn = one scripted zero-latency model call that calls `echo` with a 2 KB text
 * of its own, so every turn's tool result is a distinct 2 KB (distinct across turns AND agents:
 * each agent has its own script, route, profile and case type, so storage that shares equal
 * content across cases cannot make the figure look smaller than one agent's history is). Each
 * agent closes with one more model call that answers.
 *
 * The agents' routes declare a context window of BENCH_HISTORY_WINDOW_TOKENS (default 1M
 * tokens), so by default no compaction falls inside the run: what is measured is a turn whose
 * whole history is still in its context. At the product's default window (128000 tokens,
 * compacting at 75 %) these 4 KB turns compact once, at turn 89, inside the late window: the
 * summary, and the first turn after it, which stores the kept messages again as the links of a
 * new chain (the summary is their new first message), read as part of turns 91–100. The line's
 * `compactions` counts the summaries the measured agents wrote.
 *
 * Stored bytes are measured as Postgres stores them: the sum of pg_table_size over every table
 * of the phase's database (heap + TOAST, compressed as stored, dead row versions included;
 * indexes excluded), sampled with the number of checkpointed turns and the worker's CPU time
 * (/proc) every BENCH_HISTORY_SAMPLE_MS (100). The agents start together and run the same
 * workload, so turn counts across the fleet stand for each agent's turn: turns 1–10 are the
 * first 10 × agents checkpoints, turns 91–100 the last 10 × agents, each figure interpolated
 * between the samples around those counts. A warm-up fleet (the same agents with 10 turns)
 * runs first, so the early turns do not pay the worker's start-up (JIT, prepared statements).
 *
 * Prints ONE JSON line:
 *   {"phase":"history","agents","turns","tool_result_bytes","bytes_per_turn_first10",
 *    "bytes_per_turn_last10","cpu_ms_per_turn_first10","cpu_ms_per_turn_last10","bytes_per_agent",
 *    "context_window_tokens","compactions"}
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { canonicalJson } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import type { Store } from '@everdict/store';
import { processCpuMs } from '@everdict/testkit';
import { sendRunnable } from '../../services/turn-worker/src/envelopes.js';
import { SUMMARY_SCHEMA } from '../../services/turn-worker/src/compaction.js';

export interface HistoryEnv {
  readonly dir: string;
  readonly dbUrl: string;
  readonly prefix: string;
  readonly store: Store;
  close(): Promise<void>;
}

export interface HistoryWorker {
  readonly proc: { readonly pid?: number | undefined; readonly exitCode: number | null };
  out(): string;
}

/** What the phase borrows from run.ts: the database, the worker processes and the wait. */
export interface HistoryDeps {
  environment(tag: string, config: (dir: string) => FleetConfig): Promise<HistoryEnv>;
  startWorker(dir: string, env: Record<string, string>, name: string): Promise<HistoryWorker>;
  stopWorker(w: HistoryWorker): Promise<unknown>;
  readonly amqpUrl: string;
}

const AGENTS = Number(process.env.BENCH_HISTORY_AGENTS ?? 50);
const TURNS = Number(process.env.BENCH_HISTORY_TURNS ?? 100);
const SAMPLE_MS = Number(process.env.BENCH_HISTORY_SAMPLE_MS ?? 100);
/**
 * The context window the agents' routes declare. 1M tokens (the default) holds the whole
 * ~400 KB history, so nothing is compacted and the phase measures a turn that carries all of it;
 * 128000 (the product's default window) compacts each agent once, at turn 89.
 */
const WINDOW_TOKENS = Number(process.env.BENCH_HISTORY_WINDOW_TOKENS ?? 1_000_000);
if (!Number.isSafeInteger(WINDOW_TOKENS) || WINDOW_TOKENS <= 0) throw new Error(`BENCH_HISTORY_WINDOW_TOKENS must be a positive integer (got ${process.env.BENCH_HISTORY_WINDOW_TOKENS})`);
const WARM_TURNS = 10;
/** Each turn's result text: 1,536 random bytes as base64 are exactly 2,048 characters. */
const RESULT_CHARS = 2048;
/** How many turns at each end of the history the early and late figures average over. */
const WINDOW = 10;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The `echo` call of agent `a`'s turn `t`: its arguments are what the tool answers (canonical JSON). */
const echoArguments = (t: number) => ({ turn: t, text: randomBytes((RESULT_CHARS / 4) * 3).toString('base64') });

/** One agent's script: `turns` echo turns with distinct texts, then an answer. */
function script(turns: number): { steps: unknown[] } {
  return { steps: [...Array.from({ length: turns }, (_, t) => ({ toolCalls: [{ name: 'echo', arguments: echoArguments(t) }] })), { text: 'done' }] };
}

function historyConfig(dir: string): FleetConfig {
  const routes: FleetConfig['routes'] = {};
  const profiles: FleetConfig['profiles'] = {};
  const caseTypes: FleetConfig['caseTypes'] = {};
  for (const [kind, turns] of [['h', TURNS], ['w', WARM_TURNS]] as const) {
    for (let a = 0; a < AGENTS; a++) {
      const name = `${kind}${a}`;
      writeFileSync(join(dir, `${name}.json`), JSON.stringify(script(turns)));
      routes[name] = { adapter: 'scripted', model: 'stub', scriptPath: `${name}.json`, contextWindowTokens: WINDOW_TOKENS };
      profiles[name] = { version: '1', route: name, prompt: 'You are a benchmark agent with a long history.', tools: ['echo'] };
      caseTypes[name] = { rootProfile: name, scope: { reads: 'all', writes: [], forbidden: [] } };
    }
  }
  return {
    version: 1,
    routes,
    tools: { echo: { builtin: 'echo', description: 'Echo the arguments.' } },
    profiles,
    caseTypes,
    runtime: { leaseTtlMs: 30_000, maxActiveTasks: AGENTS + 16, prefetch: 256, turnsPerActivation: 50, sweepIntervalMs: 1000, dbPoolSize: 4 },
  };
}

async function openFleet(store: Store, kind: 'h' | 'w'): Promise<void> {
  await store.unitOfWork(async (uow) => {
    for (let a = 0; a < AGENTS; a++) {
      const name = `${kind}${a}`;
      const { caseId } = await uow.openCase({ caseType: name, originKey: `bench-history-${process.pid}-${name}-${Math.random()}`, customer: 'bench', objective: { text: `agent ${name}` } });
      const taskId = await uow.createTask({ caseId, profile: name, profileVersion: '1', objective: { text: `agent ${name}` } });
      await sendRunnable(uow, { id: taskId, case_id: caseId }, 'opened', null);
    }
  });
}

interface Sample {
  /** Checkpointed turns of the measured fleet. */
  readonly turns: number;
  /** Stored bytes of every table (heap + TOAST, no indexes). */
  readonly bytes: number;
  /** The worker's CPU time, ms. */
  readonly cpuMs: number;
}

/** The sampled series' value at `turns` checkpointed turns (linear between the samples around it). */
function at(samples: readonly Sample[], turns: number, of: (s: Sample) => number): number {
  const after = samples.findIndex((s) => s.turns >= turns);
  if (after < 0) return of(samples[samples.length - 1]!);
  if (after === 0) return of(samples[0]!);
  const a = samples[after - 1]!;
  const b = samples[after]!;
  return of(a) + ((of(b) - of(a)) * (turns - a.turns)) / (b.turns - a.turns);
}

export async function runHistory(deps: HistoryDeps): Promise<Record<string, unknown>> {
  const env = await deps.environment('history', historyConfig);
  const workerEnv = { DATABASE_URL: env.dbUrl, AMQP_URL: deps.amqpUrl, EVERDICT_CONFIG: join(env.dir, 'fleet.json'), EVERDICT_AMQP_PREFIX: env.prefix };
  const worker = await deps.startWorker(env.dir, workerEnv, 'history-w0');
  const summaries = async () =>
    (await env.store.db.query<{ n: number }>({ text: 'SELECT count(*)::int AS n FROM paper_revisions WHERE schema_id = $1', values: [SUMMARY_SCHEMA] })).rows[0]!.n;
  const sizeAndTurns = {
    name: 'bench_history_sample',
    text: `SELECT (SELECT count(*)::int FROM turn_checkpoints) AS checkpoints,
                  (SELECT sum(pg_table_size(c.oid))::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                    WHERE c.relkind IN ('r', 'p', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema')) AS bytes`,
  };
  const read = async () => {
    const { rows } = await env.store.db.query<{ checkpoints: number; bytes: string }>(sizeAndTurns);
    return { checkpoints: rows[0]!.checkpoints, bytes: Number(rows[0]!.bytes), cpuMs: processCpuMs(worker.proc.pid!) ?? NaN };
  };
  const until = async (checkpoints: number, onSample?: (s: Awaited<ReturnType<typeof read>>) => void) => {
    for (;;) {
      const s = await read();
      onSample?.(s);
      if (s.checkpoints >= checkpoints) return s;
      if (worker.proc.exitCode !== null) throw new Error(`the history worker died:\n${worker.out()}`);
      await sleep(SAMPLE_MS);
    }
  };
  try {
    // Every agent checkpoints each of its turns and its answer.
    await openFleet(env.store, 'w');
    await until(AGENTS * (WARM_TURNS + 1));
    const samples: Sample[] = [];
    // Per agent: everything its case stores, its opening included; per turn: from the first sample after it.
    const before = await read();
    const summariesBefore = await summaries();
    await openFleet(env.store, 'h');
    const base = await read();
    const total = AGENTS * (TURNS + 1);
    const end = await until(base.checkpoints + total, (s) => samples.push({ turns: s.checkpoints - base.checkpoints, bytes: s.bytes - base.bytes, cpuMs: s.cpuMs - base.cpuMs }));
    samples.unshift({ turns: 0, bytes: 0, cpuMs: 0 });
    const early = AGENTS * WINDOW;
    const lateFrom = AGENTS * (TURNS - WINDOW);
    const lateTo = AGENTS * TURNS;
    const per = (from: number, to: number, of: (s: Sample) => number) => (at(samples, to, of) - at(samples, from, of)) / (to - from);
    return {
      phase: 'history',
      agents: AGENTS,
      turns: TURNS,
      tool_result_bytes: Buffer.byteLength(canonicalJson(echoArguments(0))),
      bytes_per_turn_first10: Math.round(per(0, early, (s) => s.bytes)),
      bytes_per_turn_last10: Math.round(per(lateFrom, lateTo, (s) => s.bytes)),
      cpu_ms_per_turn_first10: +per(0, early, (s) => s.cpuMs).toFixed(3),
      cpu_ms_per_turn_last10: +per(lateFrom, lateTo, (s) => s.cpuMs).toFixed(3),
      bytes_per_agent: Math.round((end.bytes - before.bytes) / AGENTS),
      context_window_tokens: WINDOW_TOKENS,
      compactions: (await summaries()) - summariesBefore,
    };
  } finally {
    await deps.stopWorker(worker);
    await env.close();
  }
}
