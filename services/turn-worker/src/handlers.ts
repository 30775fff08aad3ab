/**
 * The turn-worker's message handlers. Each runs inside the delivery's ONE unit of work (inbox
 * row + state change + outbox rows), and none calls a model or a tool: a `task.runnable` only
 * CLAIMS the task (lease + new fence epoch); its turns run after that unit of work committed.
 *
 * Receivers authenticate against persisted assignments, never against claimed fields (§4): a
 * child's report, plan or DeadEnd is applied only if the task row says that child belongs to
 * that parent, the envelope's sender is that child, and (for a report) the child's persisted
 * state is the outcome it claims; an effect outcome only for a journalled dispatch of that call
 * and grant; a gate's answer only when the gate's recorded decisions say so; a cancel only on a
 * recorded operator action or from an ancestor (assignments.ts). A refused message writes
 * nothing: the consumer records it 'refused', dead-letters and counts it.
 */
import { EverdictError, isOneOf, TERMINAL_TASK_STATES, wakes } from '@everdict/contracts';
import type { AnyEnvelope, PlanStepV1 } from '@everdict/contracts';
import type { MessageHandler, MessageHandlers } from '@everdict/bus';
import {
  addNote,
  cancelTree,
  claimTask,
  confirmPlanRevision,
  lastConfirmedRevision,
  loadPlanRevision,
  loadTask,
  lockQuestionRow,
  lockTask,
  recordAnswer,
  recordVersionDecision,
  softCancel,
  unreportedChildren,
} from '@everdict/store';
import type { ClaimCaps, TaskRow, UnitOfWork } from '@everdict/store';
import type { Logger } from 'pino';
import type { Claim, FreshStart } from './activation.js';
import type { FreshClaim } from './firstIntent.js';
import { checkCancel, checkEffectOutcome, checkGateDecided } from './assignments.js';
import { answeredByParent, controlHandlers } from './controlHandlers.js';
import { deadEndHandler } from './deadEnd.js';
import { childOf, refuse } from './refusals.js';
import { send } from './envelopes.js';
import { wake } from './wake.js';

export interface HandlerEnv {
  /** This process's lease owner name. */
  readonly owner: string;
  readonly leaseTtlMs: () => number;
  /** Claims made by a delivery's unit of work, by message id; started once it committed. */
  readonly claims: Map<string, Claim>;
  readonly logger: Logger;
  /**
   * Writes a freshly opened task's first model intent in the claim's unit of work (so its first
   * turn costs the same commits as every other turn). Absent: the first turn writes it.
   */
  readonly firstIntent?: (uow: UnitOfWork, claim: FreshClaim) => Promise<FreshStart | null>;
  /** The per-case caps the claim respects, under the config loaded now (caps.ts). */
  readonly caps?: () => ClaimCaps;
}

/** A plan revision that arrived before the one it builds on: retried, then dead-lettered. */
export class PlanOutOfOrder extends EverdictError {
  constructor(taskId: string, revision: number, confirmed: number) {
    super('plan_out_of_order', `plan revision ${revision} of task ${taskId} expects a revision the parent has not confirmed yet (confirmed: ${confirmed})`, {
      retryable: true,
      details: { taskId, revision, confirmed },
    });
  }
}

type Of<T extends AnyEnvelope['type']> = Extract<AnyEnvelope, { type: T }>;

const ended = (t: TaskRow) => isOneOf(TERMINAL_TASK_STATES, t.state);

export function turnWorkerHandlers(env: HandlerEnv): MessageHandlers {
  const runnable: MessageHandler<Of<'task.runnable'>> = async (e, uow) => {
    const claim = await claimTask(uow, e.payload.taskId, env.owner, env.leaseTtlMs(), env.caps?.());
    if (!claim.claimed) return 'ignored';
    const held = { token: claim.token, task: claim.task };
    const fresh = e.payload.reason === 'opened' ? await env.firstIntent?.(uow, { ...held, caseType: claim.caseType, untouched: claim.untouched, headAtCommit: claim.headAtCommit }) : null;
    // Last, right before returning: the wrapper takes it as the handler returns (worker.ts
    // claimAfterCommit), so a handler that throws never leaves a claim behind.
    env.claims.set(e.id, fresh ? { ...held, fresh } : held);
    return 'applied';
  };

  const answered: MessageHandler<Of<'question.answered'>> = async (e, uow) => {
    const p = e.payload;
    // An agent never answers a human's question; it answers only one its sub-agent put to it.
    if (e.sender.service === 'turn-worker') return answeredByParent(env, e, uow);
    const q = await lockQuestionRow(uow, p.questionId);
    if (!q || q.task_id !== p.taskId || q.case_id !== e.caseId) return refuse(env, e, 'no such question for that task');
    if (!(await recordAnswer(uow, q.id, p.answer, p.answeredBy))) return 'ignored'; // answered before
    const task = await lockTask(uow, q.task_id);
    if (!task) return 'ignored';
    const detail = (task.park_detail ?? {}) as { questionId?: string; versionsHash?: string; changed?: string[] };
    if (q.kind === 'versions') {
      const decision = /^\s*continue\b/i.test(p.answer) ? 'continue' : 'park';
      if (detail.versionsHash) await recordVersionDecision(uow, { taskId: task.id, versionsHash: detail.versionsHash, decision, decidedBy: p.answeredBy, changed: detail.changed ?? [] });
      await uow.appendLedger(task.case_id, { kind: 'versions_decided', body: { taskId: task.id, questionId: q.id, decision, decidedBy: p.answeredBy } });
      if (decision === 'park') return 'applied';
    } else {
      await addNote(uow, task.id, 'answer', { questionId: q.id, answer: p.answer, answeredBy: p.answeredBy }, e.id);
      await uow.appendLedger(task.case_id, { kind: 'question_answered', body: { taskId: task.id, questionId: q.id, answeredBy: p.answeredBy } });
    }
    // Exactly the task parked on THIS question wakes; nothing else does.
    if (task.state === 'parked' && wakes(task.park_reason, 'answer') && detail.questionId === q.id) await wake(uow, task.id, 'answer');
    return 'applied';
  };

  const finished: MessageHandler<Of<'task.finished'>> = async (e, uow) => {
    const p = e.payload;
    if (p.parentTaskId === null) return 'ignored'; // a root's end is the case's business
    const child = await loadTask(uow, p.taskId);
    const bad = childOf(e, child, p.parentTaskId);
    if (bad !== null) return refuse(env, e, bad);
    if (child!.state !== p.outcome) return refuse(env, e, 'the task has not reached the outcome it reports');
    const parent = await lockTask(uow, p.parentTaskId);
    if (!parent || ended(parent)) return 'ignored';
    await addNote(uow, parent.id, 'child_report', { childTaskId: child!.id, outcome: p.outcome, summary: p.summary ?? '' }, e.id);
    if (parent.state === 'parked' && wakes(parent.park_reason, 'children_reported') && (await unreportedChildren(uow, parent.id)) === 0) {
      await wake(uow, parent.id, 'children_reported');
    }
    return 'applied';
  };

  const planSubmitted: MessageHandler<Of<'plan.submitted'>> = async (e, uow) => {
    const p = e.payload;
    const child = await loadTask(uow, p.taskId);
    const bad = childOf(e, child, p.parentTaskId);
    if (bad !== null) return refuse(env, e, bad);
    // The message must carry exactly the persisted, immutable revision it names.
    const rev = await loadPlanRevision(uow, p.taskId, p.revision);
    if (!rev || rev.plan_hash !== p.planHash || rev.expected_revision !== p.expectedRevision || Number(rev.row_version) !== p.rowVersion) {
      return refuse(env, e, 'plan revision does not match the persisted revision');
    }
    const confirmed = await lastConfirmedRevision(uow, p.taskId);
    if (p.revision <= confirmed) return 'ignored'; // already confirmed: a stale or repeated submission
    if (p.expectedRevision !== confirmed) throw new PlanOutOfOrder(p.taskId, p.revision, confirmed);
    const parent = await lockTask(uow, p.parentTaskId);
    if (!parent || ended(parent)) return 'ignored';
    const steps = rev.steps as PlanStepV1[];
    await confirmPlanRevision(uow, { taskId: p.taskId, revision: p.revision, confirmedBy: parent.id, planHash: p.planHash, messageId: e.id, steps });
    await addNote(uow, parent.id, 'plan', { childTaskId: p.taskId, revision: p.revision, steps: steps.map((s) => ({ stepId: s.stepId, title: s.title })) }, e.id);
    await uow.appendLedger(parent.case_id, { kind: 'plan_confirmed', body: { taskId: p.taskId, revision: p.revision, planHash: p.planHash, confirmedBy: parent.id } });
    return 'applied';
  };

  const cancel: MessageHandler<Of<'task.cancel'>> = async (e, uow) => {
    const p = e.payload;
    const task = await lockTask(uow, p.taskId);
    if (!task || task.case_id !== e.caseId) return refuse(env, e, 'no such task in the case');
    const bad = await checkCancel(uow, e, task);
    if (bad !== null) return refuse(env, e, bad);
    if (ended(task)) return 'ignored';
    if (p.mode === 'soft') {
      await softCancel(uow, task.id);
      await uow.appendLedger(task.case_id, { kind: 'task_cancel_requested', body: { taskId: task.id, mode: 'soft', requestedBy: p.requestedBy ?? null } });
      return 'applied';
    }
    // Hard: the fence epoch of the whole subtree moves on, so nothing more is dispatched for it.
    const cancelled = await cancelTree(uow, task.id);
    const top = cancelled.find((t) => t.id === task.id);
    if (top && top.parent_id !== null) {
      await send(uow, 'task.finished', { taskId: top.id, parentTaskId: top.parent_id, outcome: 'cancelled', summary: 'cancelled' }, { caseId: top.case_id, from: top });
    }
    await uow.appendLedger(task.case_id, { kind: 'task_cancelled', body: { taskId: task.id, mode: 'hard', tasks: cancelled.map((t) => t.id), requestedBy: p.requestedBy ?? null } });
    return 'applied';
  };

  /**
   * A gate's final answer. A task waits on its proposal's gate (park `gate`, detail.gateId):
   * a rejection, expiry or revocation wakes it with the reason (a refused proposal); an approval
   * does NOT — the effect runs now and the task wakes on what landed (`effect.outcome`).
   */
  const gateDecided: MessageHandler<Of<'gate.decided'>> = async (e, uow) => {
    const p = e.payload;
    // The gate decides; the reconciler closes gates that expired undecided; the gate's record must agree.
    const bad = await checkGateDecided(uow, e);
    if (bad !== null) return refuse(env, e, bad);
    const task = await lockTask(uow, p.taskId);
    if (!task || task.case_id !== e.caseId) return 'ignored';
    const detail = (task.park_detail ?? {}) as { gateId?: string };
    // A consent gate closed by expiry or revocation: the call it waits on is refused when the
    // task runs again (the gate service wakes it itself on a verdict).
    if (task.state === 'parked' && wakes(task.park_reason, 'consent_decided') && detail.gateId === p.gateId) return (await wake(uow, task.id, 'consent_decided'), 'applied');
    if (task.state !== 'parked' || !wakes(task.park_reason, 'gate_refused') || detail.gateId !== p.gateId) return 'ignored';
    await addNote(uow, task.id, 'gate', { gateId: p.gateId, outcome: p.outcome, reason: p.reason ?? null }, e.id);
    if (p.outcome === 'approved') return 'applied';
    await wake(uow, task.id, 'gate_refused');
    return 'applied';
  };

  /**
   * What landed for an effect. Always a note for the task; it wakes the task waiting on that
   * effect (same packet digest or grant, or the call it waits to see reconciled) only when the
   * outcome is conclusive — an unknown outcome is reconciled before anything else touches it.
   */
  const effectOutcome: MessageHandler<Of<'effect.outcome'>> = async (e, uow) => {
    const p = e.payload;
    const bad = await checkEffectOutcome(uow, e);
    if (bad !== null) return refuse(env, e, bad);
    const task = await lockTask(uow, p.taskId);
    if (!task || task.case_id !== e.caseId || ended(task)) return 'ignored';
    await addNote(uow, task.id, 'outcome', { callId: p.callId, grantId: p.grantId, outcome: p.outcome, established: p.established, receipt: p.receipt ?? null }, e.id);
    const detail = (task.park_detail ?? {}) as { packetDigest?: string; grantId?: string; effectCallId?: string };
    const waitsOnIt = detail.packetDigest === p.packetDigest || detail.grantId === p.grantId || detail.effectCallId === p.callId;
    if (task.state === 'parked' && wakes(task.park_reason, 'effect_landed') && waitsOnIt && p.outcome !== 'unknown') await wake(uow, task.id, 'effect_landed');
    return 'applied';
  };

  return {
    'task.runnable': runnable,
    'question.answered': answered,
    'task.finished': finished,
    'plan.submitted': planSubmitted,
    'task.cancel': cancel,
    'gate.decided': gateDecided,
    'effect.outcome': effectOutcome,
    'task.dead_end': deadEndHandler(env),
    ...controlHandlers(env),
  };
}
