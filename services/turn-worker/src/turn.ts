/**
 * One durable turn (seed 004 §2, DESIGN §5) of a task this worker holds the lease of.
 *
 * Commits — what each task's turn goes through (the benchmark's "commits per turn"):
 *   C1  request paper + ordinal-0 intent (+ the notes the request carries) ......... turnJournal
 *       — the model is called only after it is durable, with no transaction open. A turn that
 *       follows another in the same activation gets its C1 written by the previous turn's C3
 *       (the next request is fully determined by the committed state), so it costs no commit;
 *   C2  response paper (the model call completed) + the first batch's tool intents . turnJournal
 *       — before any tool runs (each later sequential batch commits its intents the same way,
 *       with the outcomes of the batches before it; a response with no tool call is written by
 *       C3 instead). When every call it carries is unobservable outside this process (intrinsic
 *       tools, built-in in-process reads, the proposal tool) it is not written at all when no
 *       earlier journalled outcome waits on it: its intents are inserted settled by C3 (or by a
 *       later batch's C2), and a turn writes ONE commit after its model call (durability.ts);
 *       when one does wait, it commits without waiting for the WAL flush;
 *   C3  tool outcomes + offloaded results + state paper + checkpoint + the next turn's intent
 *       + task transition + outbox + one ledger record: ONE value (turnWrite.ts), executed by
 *       commit.ts — with the children, plan revision, proposal and questions placed before it
 *       (placement.ts) when the turn has any.
 * C1/C2/C3 of the many tasks a worker runs are group-committed: one fenced statement carries the
 * writes of every task due at that moment (libs/store groupCommit.ts); each task's part is
 * fenced on its own. Turns that place children, revise a plan, propose, ask a question or compact
 * commit as a unit of work instead, which executes the same value.
 *
 * What each crash point leaves behind, and how the next worker continues (the recovery
 * contract the crash matrix tests):
 *   after_intent        the intent is durable, nothing else of the turn. The model is asked (the
 *                       first real ask — nothing was asked before the kill).
 *   after_model         the answer died in memory. The model is asked again — the only case of a
 *                       second ask, and only because no response was ever persisted.
 *   after_response      C2 is durable. The response is replayed from the journal (no ask); tools
 *                       run under the call ids allocated before the crash.
 *   after_read_batch    a later batch's intents are durable with every outcome of the batches
 *                       before it. Response replayed; those outcomes are replayed from the
 *                       journal (no completed read runs again); the open intents run under
 *                       their original call ids.
 *   after_tool_results  C2 is durable; outcomes died in memory. Response replayed; reads whose
 *                       outcome was never persisted run again under their original call id (they
 *                       never completed); a write with an open intent would be withheld as unknown.
 *   after_commit        C3 (or a claim's unit of work) is durable. The checkpoint is restored:
 *                       nothing of that turn runs again; a redelivered message is an inbox duplicate.
 * A deferred C2 changes none of these (a killed worker does not take a commit with it; Postgres
 * holds it). A crash of Postgres itself before the flush can lose it, only together with every
 * later commit: the turn is then exactly at after_model (durability.ts argues it against §2).
 * A folded C2 is never written: a turn whose calls are all unobservable reaches neither
 * after_response nor after_read_batch, and a kill before its C3 is the after_model case.
 */
import { appendFileSync } from 'node:fs';
import { isEverdictError } from '@everdict/contracts';
import { runTurn } from '@everdict/agent-runtime';
import type { CallRecord, KernelClock, KernelDeps, RunContext, RunState, TurnResult } from '@everdict/agent-runtime';
import type { ModelClient } from '@everdict/llm';
import { reportRouteHealth } from '@everdict/store';
import type { FenceToken, JournalCommitter, LedgerHead, NoteRow, Store, StoredCall, TaskRow } from '@everdict/store';
import type { Logger } from 'pino';
import type { AgentView, Catalog } from './catalog.js';
import { commitTurn, parkWithoutTurn } from './commit.js';
import type { CrashPoints } from './crashpoints.js';
import type { FleetStopHint } from './fleetStop.js';
import { meteredModelClient, type TurnMetrics } from './metrics.js';
import { noteDecision, notesMessage } from './notes.js';
import type { HostState } from './statePaper.js';
import { committedHandoff, deferredSubAgents, paperResultStore, TurnBuffer } from './turnBuffer.js';
import { TurnJournal } from './turnJournal.js';
import { capModelCalls, holdGate } from './caps.js';
import type { ToolTiming } from './tools.js';
import { permissionHook, type ConsentAsk } from './consent.js';
import type { ProposalTurn } from './writesPropose.js';
import { SPAN, withSpan } from '@everdict/tracing';

export { parkWithoutTurn } from './commit.js';

/** A task held by this worker between turns of one activation. */
export interface TaskRun {
  readonly task: TaskRow;
  readonly token: FenceToken;
  readonly rootTaskId: string;
  readonly view: AgentView;
  readonly runCtx: RunContext;
  run: RunState;
  host: HostState;
  /** Journal rows of run.turn found at restore; the next turn consumes them. */
  stored: Map<number, StoredCall>;
  /** Notes the next turn's request carries (pinned to it with its intent). */
  notes: NoteRow[];
  /** Whether a checkpoint row exists for run.turn. */
  checkpointed: boolean;
  /** The state hash of the checkpoint this activation last committed, for run.turn (null: none yet). */
  checkpointHash: string | null;
  /** The model intent of run.turn, written by the previous turn's commit (null: not written). */
  prewritten: CallRecord | null;
  /** The case's ledger head as this activation last appended it (null: unknown). */
  ledgerHead: LedgerHead | null;
  /** Turns committed in this activation. */
  turns: number;
}

export interface TurnTiming extends ToolTiming {
  modelMs: number;
  toolMs: number;
}

/** What every turn of this process shares. */
export interface TurnEnv {
  readonly store: Store;
  /** Group commit of the hot-path turn writes (one statement for many tasks). */
  readonly committer: JournalCommitter;
  readonly catalog: Catalog;
  readonly crash: CrashPoints;
  readonly metrics: TurnMetrics;
  readonly clock: KernelClock;
  /** Running turns' timing sinks, by task id (tools report into them). */
  readonly timings: Map<string, TurnTiming>;
  /** EVERDICT_MODEL_LOG: one JSON line per real model call (tests count asks per turn). */
  readonly modelLog: string | null;
  readonly logger: Logger;
  /** Last health this process reported per route (a report is written only on a change). */
  readonly routeHealth: Map<string, boolean>;
  /** Whether a fleet soft stop may be in force (checked under its lock before parking on it). */
  readonly fleetStop: FleetStopHint;
}

export type TurnEnd = { readonly ended: false } | { readonly ended: true; readonly outcome: 'completed' | 'failed' | 'parked' | 'released' | 'cancelled' };

function timing(): TurnTiming {
  const t: TurnTiming = {
    modelMs: 0,
    toolMs: 0,
    addToolMs(ms) {
      t.toolMs += ms;
    },
  };
  return t;
}

/** The route's client, timed, and logging every real ask when EVERDICT_MODEL_LOG is set. */
function instrumented(inner: ModelClient, t: TurnTiming, log: string | null, key: { taskId: string; turn: number }): ModelClient {
  return {
    route: inner.route,
    async complete(req, opts) {
      if (log) appendFileSync(log, `${JSON.stringify({ taskId: key.taskId, turn: key.turn, route: inner.route.name, pid: process.pid, at: Date.now() })}\n`);
      const started = performance.now();
      try {
        // The span names the task, turn and route only: never the request's messages or the reply.
        const reply = await withSpan(SPAN.modelCall, { attributes: { 'task.id': key.taskId, turn: key.turn, route: inner.route.name } }, () => inner.complete(req, opts));
        return reply;
      } finally {
        t.modelMs += performance.now() - started;
      }
    },
  };
}

/** Runs one turn and commits it. Throws StaleFence if the lease was lost. */
export async function durableTurn(env: TurnEnv, tr: TaskRun, opts: { signal: AbortSignal; release: boolean }): Promise<TurnEnd> {
  const started = performance.now();
  let commits = 0;
  const onCommit = () => void commits++;
  const turnNo = tr.run.turn;
  const taskId = tr.task.id;
  const notes = tr.notes;
  const stored = tr.stored;
  const prewritten = tr.prewritten;
  tr.notes = [];
  tr.stored = new Map();
  tr.prewritten = null;

  let run = tr.run;
  let host = tr.host;
  const text = notesMessage(notes);
  if (text !== null) {
    run = { ...run, messages: [...run.messages, { role: 'user', content: text }] };
    host = { ...host, decisions: [...host.decisions, ...notes.map((n) => noteDecision(n, turnNo)).filter((d) => d !== null)] };
  }

  const t = timing();
  env.timings.set(taskId, t);
  const buffer = new TurnBuffer();
  const journal = new TurnJournal({
    store: env.store,
    committer: env.committer,
    token: tr.token,
    caseId: tr.task.case_id,
    turn: turnNo,
    versions: tr.view.versions,
    route: tr.view.model.route.name,
    routeModel: tr.view.model.route.model,
    registry: tr.view.registry,
    stored,
    prewritten,
    notesToPin: notes.map((n) => n.seq),
    crash: env.crash,
    results: buffer,
    onCommit,
  });
  const proposing: ProposalTurn = {
    caseId: tr.task.case_id,
    envelope: tr.runCtx.envelope,
    profileName: tr.view.profileName,
    token: tr.token,
    plan: run.plan ? { revision: run.plan.revision, stepIds: run.plan.steps.map((s) => s.id) } : null,
    proposal: null,
    ledger: [],
  };
  env.catalog.proposals.set(taskId, proposing);
  const consents: ConsentAsk[] = [];
  const deps: KernelDeps = {
    model: capModelCalls(instrumented(meteredModelClient(tr.view.model, env.metrics), t, env.modelLog, { taskId, turn: turnNo }), holdGate(env.store.db, env.catalog.loaded.config, 'modelCalls'), { taskId, turn: turnNo }),
    journal,
    tools: tr.view.registry,
    results: paperResultStore(env.store.db, tr.task.case_id, buffer),
    clock: env.clock,
    subAgents: deferredSubAgents(buffer),
    handoff: committedHandoff(buffer),
    // K3: writes (only proposals are allowed) and consent-requiring reads (the case type's
    // consent rules; an `ask` parks the turn on a consent gate, placed with its commit).
    permission: permissionHook({ db: env.store.db, fleet: () => env.catalog.loaded.config, caseId: tr.task.case_id, profileName: tr.view.profileName, registry: tr.view.registry, asks: consents }),
  };

  let result: TurnResult;
  try {
    result = await runTurn(deps, tr.runCtx, run, { signal: opts.signal });
  } catch (err) {
    if (isEverdictError(err) && err.code === 'journal_request_mismatch') {
      // The journal answered this turn for a different request (the agent changed mid-turn):
      // the recorded response stands and nobody guesses — an operator decides.
      await parkWithoutTurn(env, tr, 'capability_gap', { kind: 'journal_request_mismatch', turn: turnNo });
      return { ended: true, outcome: 'parked' };
    }
    throw err;
  } finally {
    env.timings.delete(taskId);
    env.catalog.proposals.delete(taskId);
  }
  if (journal.ranTools) env.crash.reach('after_tool_results', { taskId, turn: turnNo });

  const end = await commitTurn(env, tr, { result, journal, buffer, proposing, consents, host, before: run, restored: { run: tr.run, host: tr.host }, release: opts.release, onCommit });
  env.crash.reach('after_commit', { taskId, turn: turnNo });
  await noteRouteHealth(env, tr, result);

  const wallMs = performance.now() - started;
  env.metrics.turn(end.ended ? end.outcome : 'continued', wallMs / 1000, Math.max(0, wallMs - t.modelMs - t.toolMs) / 1000, commits);
  tr.turns++;
  return end;
}

/** The provider health signal: written only when this process sees a route change state. */
async function noteRouteHealth(env: TurnEnv, tr: TaskRun, result: TurnResult): Promise<void> {
  const route = tr.view.model.route.name;
  let ok: boolean | null = null;
  for (const e of result.events) {
    if (e.type === 'model_call' && !e.replayed) ok = true;
    if (e.type === 'model_error' && (e.kind === 'provider_down' || e.kind === 'retryable')) ok = false;
  }
  if (ok === null || env.routeHealth.get(route) === ok) return;
  env.routeHealth.set(route, ok);
  await reportRouteHealth(env.store.db, route, ok).catch((err: unknown) => env.logger.warn({ route, err: String(err) }, 'route health not recorded'));
}
