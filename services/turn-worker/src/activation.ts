/**
 * An activation: what a worker does with a task it has just claimed (lease + new fence epoch),
 * OUTSIDE the unit of work that claimed it. It restores the pinned checkpoint (verifying the
 * state hash), reconciles the call journal of the turn in flight, checks the versions the state
 * was produced under, applies the notes that woke it, then runs turns — no broker round trip
 * between them — until the task settles, parks, or reaches the per-activation turn cap (then
 * it is released and re-queued). Whatever cannot be verified parks the task; nothing is guessed.
 */
import { canonicalJson, inCanonicalOrder, isEverdictError, newId, unavailableConnector } from '@everdict/contracts';
import type { ExecutionEnvelope, ExecutionMode, RuntimeStatePaper } from '@everdict/contracts';
import { initialRunState, resumeRun } from '@everdict/agent-runtime';
import type { CallRecord, RunContext, RunState } from '@everdict/agent-runtime';
import {
  askQuestion,
  loadRestorePoint,
  PaperCorrupt,
  PaperMissing,
  recordVersionDecision,
  versionDecision,
} from '@everdict/store';
import type { FenceToken, HeadAtCommit, LedgerHead, NoteRow, StoredCall, TaskRow } from '@everdict/store';
import { markMessagesDurable } from './canonical.js';
import { topUp } from './notes.js';
import { decodeStatePaper, RestoreFailure } from './statePaper.js';
import type { HostState } from './statePaper.js';
import type { HeldStates } from './heldStates.js';
import { parkDownWithoutTurn, releaseWithoutTurn } from './commit.js';
import { durableTurn, parkWithoutTurn } from './turn.js';
import type { TaskRun, TurnEnv } from './turn.js';
import type { AgentView, Catalog } from './catalog.js';
import { changedVersions, decideVersions, versionsHash } from './versions.js';
import type { Versions } from './versions.js';
import { SPAN, withSpan } from '@everdict/tracing';
import type { TraceContext } from '@everdict/tracing';

export interface ActivationEnv extends TurnEnv {
  /** True once the process drains: the running turn finishes, then the task is released. */
  draining(): boolean;
  /** The states of tasks this worker released at a checkpoint (heldStates.ts). */
  readonly held: HeldStates;
}

export interface Claim {
  readonly token: FenceToken;
  readonly task: TaskRow;
  /** The trace of the delivery that made the claim; the activation's turns continue it. */
  readonly trace?: TraceContext;
  /** Set when the claim's unit of work wrote the first intent of an untouched task (firstIntent.ts). */
  readonly fresh?: FreshStart;
}

/**
 * What an untouched task's activation starts from, handed over by the unit of work that claimed
 * it: its restore point is known without reading it — no checkpoint, no pending note, and no
 * journal row but turn 0's model intent, which that unit of work wrote.
 */
export interface FreshStart {
  readonly caseType: string;
  /** Turn 0's model intent, as written (the turn consumes it as a prewritten intent). */
  readonly intent: CallRecord;
  /** The versions the intent was built under (the baseline a version change is judged against). */
  readonly versions: Versions;
  readonly headAtCommit: HeadAtCommit | null;
}

/** The objective text of a task row (`{text}` as the runtime writes it, else its JSON). */
export function objectiveText(objective: unknown): string {
  if (typeof objective === 'string') return objective;
  const text = (objective as { text?: unknown } | null)?.text;
  return typeof text === 'string' ? text : canonicalJson(objective ?? {});
}

/** The host part of a runtime-state document: all of it but the kernel's run and the identity fields. */
function hostStateOf(doc: RuntimeStatePaper): HostState {
  const { schema: _s, taskId: _t, caseId: _c, chat: _m, turn: _n, phase: _p, run: _r, ...rest } = doc;
  return rest;
}

export interface PinnedContext {
  envelope: ExecutionEnvelope;
  mode: ExecutionMode | null;
  depth: number;
  tools: string[] | null;
}

/** The execution context of a task that has no checkpoint yet (a root's from its case type). */
export function freshContext(catalog: Pick<Catalog, 'rootContext'>, task: TaskRow, caseType: string): PinnedContext {
  if (task.parent_id !== null) {
    const c = (task.context ?? {}) as { envelope?: ExecutionEnvelope; mode?: ExecutionMode | null; tools?: string[] };
    if (!c.envelope) throw new RestoreFailure('invalid_state', `child task ${task.id} has no execution context`, { taskId: task.id });
    return { envelope: c.envelope, mode: c.mode ?? null, depth: task.depth, tools: c.tools ?? [] };
  }
  const root = catalog.rootContext(caseType);
  return { envelope: root.envelope, mode: root.mode, depth: 0, tools: null };
}

/** What the kernel runs a task's turns under: its profile's prompt and its pinned context. */
export function runContextOf(taskId: string, view: AgentView, context: PinnedContext): RunContext {
  return {
    taskId,
    systemPrompt: view.profile.prompt,
    envelope: context.envelope,
    ...(context.mode ? { mode: context.mode } : {}),
    depth: context.depth,
    ...(view.profile.maxOutputTokens ? { maxOutputTokens: view.profile.maxOutputTokens } : {}),
  };
}

/** Restores a claimed task, or parks it (restore failure, version decision) and returns null. */
export async function restore(env: ActivationEnv, claim: Claim): Promise<TaskRun | null> {
  const { task, token } = claim;
  let run: RunState;
  let host: HostState | null = null;
  let context: PinnedContext;
  let checkpointed = false;
  let stored: StoredCall[];
  let head: LedgerHead | null;
  let notes: NoteRow[];
  try {
    const { fresh } = claim;
    // The state this worker released the task at, if it holds it: continued from when the latest
    // checkpoint records exactly it (the store then sends no state bytes).
    const held = fresh ? undefined : env.held.take(task.id);
    const point = fresh ? { checkpoint: null, caseType: fresh.caseType, head: fresh.headAtCommit?.head ?? null, calls: [], notes: [] } : await loadRestorePoint(env.store.db, task.id, task.case_id, held?.stateHash ?? null);
    head = point.head;
    stored = point.calls;
    notes = point.notes;
    const cp = point.checkpoint;
    if (cp) {
      let rest: HostState;
      if (cp.bytes === null && held !== undefined) {
        ({ run, host: rest } = held);
        env.metrics.restored('held');
      } else {
        if (cp.bytes === null) throw new RestoreFailure('invalid_state', `checkpoint ${cp.turn} of task ${task.id} came without its state`, { taskId: task.id });
        const decoded = decodeStatePaper(cp.bytes, task.id, cp.statePaperId);
        run = decoded.run;
        rest = hostStateOf(decoded.doc);
        env.metrics.restored('store');
      }
      // Reassembled from its blocks and verified, or committed by this worker: every block of this conversation is stored.
      markMessagesDurable(task.id, run.messages);
      host = rest;
      context = { envelope: rest.context.envelope as ExecutionEnvelope, mode: (rest.context.mode as ExecutionMode | null) ?? null, depth: rest.context.depth, tools: rest.context.tools };
      checkpointed = true;
    } else {
      context = freshContext(env.catalog, task, point.caseType);
      run = initialRunState(task.id, objectiveText(task.objective));
    }
  } catch (err) {
    if (err instanceof PaperMissing || err instanceof PaperCorrupt || err instanceof RestoreFailure) {
      const reason = err instanceof RestoreFailure ? err.reason : err instanceof PaperMissing ? 'paper_missing' : 'paper_corrupt';
      env.metrics.restoreFailure(reason);
      env.logger.warn({ caseId: task.case_id, taskId: task.id, reason }, 'restore failed; parking the task');
      await parkWithoutTurn(env, claim, 'capability_gap', { kind: 'restore_failed', reason, error: err.message.slice(0, 300) });
      return null;
    }
    throw err;
  }

  context = { ...context, envelope: { ...context.envelope, budget: topUp(context.envelope.budget, notes) } };
  let view: AgentView;
  try {
    // The servers its MCP tools come from are reached first: the tools the model is shown, and
    // the versions recorded with them, are those the servers list now.
    await env.catalog.connectTools(task.profile);
    view = env.catalog.view(task.profile, context.tools, context.envelope);
  } catch (err) {
    const connector = unavailableConnector(err);
    if (connector === null) throw err;
    env.logger.warn({ caseId: task.case_id, taskId: task.id, connector }, 'tool server unavailable; parking the task');
    await parkDownWithoutTurn(env, claim, connector, err instanceof Error ? err.message : String(err));
    return null;
  }

  const baseline = (host?.versions ?? claim.fresh?.versions ?? (stored.find((c) => c.ordinal === 0)?.versions as Versions | undefined)) ?? null;
  if (baseline !== null) {
    const changed = changedVersions(baseline, view.versions);
    if (changed.length > 0) {
      const hash = versionsHash(view.versions);
      const recorded = await versionDecision(env.store.db, task.id, hash);
      const decision = recorded?.decision ?? decideVersions(env.catalog.settings.versionPolicy, changed);
      if (decision === 'park') {
        const questionId = newId();
        await parkWithoutTurn(env, claim, 'question', { kind: 'versions', questionId, versionsHash: hash, changed }, async (uow) => {
          await askQuestion(uow, token, {
            id: questionId,
            caseId: task.case_id,
            taskId: task.id,
            askedBy: null,
            kind: 'versions',
            gap: `the task was produced under other versions (${changed.join(', ')} changed)`,
            checked: [`from ${versionsHash(baseline)}`, `to ${hash}`],
            dependsOn: [`the rest of task ${task.id}`],
            alternatives: ['continue under the new versions', 'keep it parked (cancel it to stop)'],
            decisionNeeded: 'answer "continue" to resume under the new versions',
          });
        });
        return null;
      }
      if (!recorded) {
        await env.store.unitOfWork(async (uow) => {
          await uow.requireFence(token, 'version_decision');
          await recordVersionDecision(uow, { taskId: task.id, versionsHash: hash, decision: 'continue', decidedBy: 'policy', changed });
          await uow.appendLedger(task.case_id, { kind: 'versions_changed', body: { taskId: task.id, from: baseline, to: view.versions, changed, decision: 'continue', decidedBy: 'policy' } });
        });
      }
    }
  }

  // A suspended run was woken (an answer, reports, a top-up, a health wake-up): it goes on.
  if (run.settlement?.kind === 'suspended') run = resumeRun(run);
  if (run.settlement !== null) throw new RestoreFailure('invalid_state', `task ${task.id} is runnable but its run settled ${run.settlement.kind}`, { taskId: task.id });

  host = {
    ...(host ?? { pending: { calls: [], gates: [], messages: [] }, paperHeads: {}, handleScopeCaseId: task.case_id, completedPlanSteps: [], decisions: [], summary: null, contextHash: null }),
    versions: view.versions,
    // Keys in canonical order: the state paper is hashed (canonicalJson writes it in one pass).
    // The envelope comes from config or a jsonb column, whose key orders are not JCS's: put in order once here.
    context: { depth: context.depth, envelope: inCanonicalOrder(context.envelope) as HostState['context']['envelope'], mode: context.mode as HostState['context']['mode'], tools: context.tools },
  };
  const runCtx = runContextOf(task.id, view, context);
  return {
    task,
    token,
    rootTaskId: task.root_task_id ?? task.id,
    view,
    runCtx,
    run,
    host,
    stored: new Map(stored.map((c) => [c.ordinal, c])),
    notes,
    checkpointed,
    checkpointHash: null,
    prewritten: claim.fresh?.intent ?? null,
    ledgerHead: head,
    turns: 0,
  };
}

/** Restores the task and runs its turns until it settles, parks or is released. */
export async function runActivation(env: ActivationEnv, claim: Claim, signal: AbortSignal): Promise<void> {
  const tr = await restore(env, claim);
  if (!tr) return;
  for (;;) {
    if (signal.aborted) return; // the lease is gone; nothing more may be written
    if (env.draining() && tr.turns > 0) {
      // Shutting down between two turns: give the task back now; another worker continues it
      // from the checkpoint (and the next turn's intent, if written).
      await releaseWithoutTurn(env.store, tr);
      return;
    }
    const release = tr.turns + 1 >= env.catalog.settings.turnsPerActivation || env.draining();
    const end = await withSpan(SPAN.turn, { attributes: { 'case.id': tr.task.case_id, 'task.id': tr.task.id, turn: tr.run.turn } }, async (span) => {
      const ended = await durableTurn(env, tr, { signal, release });
      span.set({ outcome: ended.ended ? ended.outcome : 'continued' });
      return ended;
    });
    // Released at the checkpoint it just committed: its next activation (most often here) continues from this state.
    if (end.ended && end.outcome === 'released' && tr.checkpointHash !== null) env.held.keep(tr.task.id, { stateHash: tr.checkpointHash, run: tr.run, host: tr.host });
    if (end.ended) return;
    // The turn's commit is durable and carried the blocks of the messages it checkpointed: the
    // next turn's papers reference them and carry only what that turn appends.
    if (tr.checkpointed) markMessagesDurable(tr.task.id, tr.run.messages);
  }
}

/** Whether an activation failure is the lease being lost (expected, counted by the store). */
export function isStale(err: unknown): boolean {
  return isEverdictError(err) && err.code === 'stale_fence';
}
