/**
 * Handlers of the turn-worker's control messages beyond a turn's own lifecycle: a sub-agent's
 * question reaching its parent and the parent's answer reaching the sub-agent (§11.3), an
 * operator's resume of a soft stop (§7) and an operator's budget top-up (§11.4). Like every
 * handler they run in the delivery's ONE unit of work (inbox row + state change + outbox rows)
 * and authenticate against persisted assignments, never against claimed fields (§4).
 */
import { isOneOf, TERMINAL_TASK_STATES, wakes } from '@everdict/contracts';
import type { AnyEnvelope, BudgetTopUp } from '@everdict/contracts';
import type { MessageHandler, MessageHandlers, Refused } from '@everdict/bus';
import { addNote, loadTask, lockTask, withdrawSoftCancelRequest } from '@everdict/store';
import type { TaskRow, UnitOfWork } from '@everdict/store';
import { checkOperatorControl } from './assignments.js';
import { resumeAction } from './decisions.js';
import type { HandlerEnv } from './handlers.js';
import { agentPrincipal } from './questions.js';
import { refuse } from './refusals.js';
import { wake } from './wake.js';

type Of<T extends AnyEnvelope['type']> = Extract<AnyEnvelope, { type: T }>;

const ended = (t: TaskRow) => isOneOf(TERMINAL_TASK_STATES, t.state);

/** The question a task is parked on and whom it asked (its park detail). */
function waitingOn(task: TaskRow): { questionId: string | null; askedOf: string | null } {
  const d = (task.state === 'parked' && wakes(task.park_reason, 'answer') ? (task.park_detail ?? {}) : {}) as { questionId?: unknown; askedOf?: unknown };
  return { questionId: typeof d.questionId === 'string' ? d.questionId : null, askedOf: typeof d.askedOf === 'string' ? d.askedOf : null };
}

/**
 * The budget top-up itself: a note that raises the named limits at the task's next restore, a
 * ledger record, and — for a task parked `budget` — the wake-up. `messageId` dedups the note.
 */
async function applyTopUp(uow: UnitOfWork, task: TaskRow, budget: Readonly<Record<string, number>>, by: string, source: { ref: string; messageId: string | null; reason?: string | undefined }): Promise<boolean> {
  const seq = await addNote(uow, task.id, 'top_up', { budget, by, ref: source.ref }, source.messageId);
  if (seq === null) return false; // this message topped it up before
  await uow.appendLedger(task.case_id, { kind: 'budget_topped_up', body: { taskId: task.id, budget, by, messageId: source.messageId, reason: source.reason ?? null } });
  if (task.state === 'parked' && wakes(task.park_reason, 'top_up')) await wake(uow, task.id, 'top_up');
  return true;
}

/**
 * A parent's answer to the question one of its sub-agents put to it (`question.answered` sent by
 * the turn-worker on the parent's behalf). Applied only if the sender is the persisted parent of
 * the task, the task is parked on exactly that question and asked exactly that parent.
 */
export async function answeredByParent(env: HandlerEnv, e: Of<'question.answered'>, uow: UnitOfWork): Promise<'applied' | 'ignored' | Refused> {
  const p = e.payload;
  const parentId = e.sender.taskId;
  if (parentId === null || p.answeredBy !== agentPrincipal(parentId)) return refuse(env, e, 'an agent answers only as the task it is');
  const child = await lockTask(uow, p.taskId);
  if (!child || child.case_id !== e.caseId || child.parent_id !== parentId) return refuse(env, e, 'only the parent a question was put to answers it');
  const parent = await loadTask(uow, parentId);
  if (!parent || parent.case_id !== e.caseId || e.lineage.parentTaskId !== parent.parent_id) return refuse(env, e, 'lineage does not match the task graph');
  const w = waitingOn(child);
  if (w.questionId !== p.questionId || w.askedOf !== parentId) return 'ignored'; // answered before, or no longer waiting on it
  await addNote(uow, child.id, 'answer', { questionId: p.questionId, answer: p.answer, answeredBy: p.answeredBy }, e.id);
  await uow.appendLedger(child.case_id, { kind: 'question_answered', body: { taskId: child.id, questionId: p.questionId, answeredBy: p.answeredBy } });
  // Exactly the task parked on THIS question wakes; nothing else does.
  await wake(uow, child.id, 'answer');
  return 'applied';
}

export function controlHandlers(env: HandlerEnv): MessageHandlers {
  /** A sub-agent's question reaches its parent as a note; a parent waiting on its children wakes. */
  const raised: MessageHandler<Of<'question.raised'>> = async (e, uow) => {
    const p = e.payload;
    const child = await loadTask(uow, p.taskId);
    if (!child) return refuse(env, e, 'unknown task');
    if (child.parent_id === null || child.parent_id !== p.parentTaskId) return refuse(env, e, 'task is not a child of that parent');
    if (e.sender.taskId !== child.id) return refuse(env, e, 'sender is not the task');
    if (e.lineage.parentTaskId !== child.parent_id || e.caseId !== child.case_id) return refuse(env, e, 'lineage does not match the task graph');
    const w = waitingOn(child);
    if (w.questionId !== p.questionId || w.askedOf !== p.parentTaskId) return refuse(env, e, 'the task is not waiting on that question');
    const parent = await lockTask(uow, p.parentTaskId);
    if (!parent || ended(parent)) {
      // Nobody is left to answer: the task stays parked (never failed for waiting), visible as such.
      await uow.appendLedger(child.case_id, { kind: 'question_unrouted', body: { taskId: child.id, questionId: p.questionId, parentTaskId: p.parentTaskId, why: 'the parent has finished' } });
      return 'applied';
    }
    const { questionId, reason, gap, checked, dependsOn, alternatives, decisionNeeded } = p;
    await addNote(uow, parent.id, 'question', { questionId, childTaskId: child.id, reason: reason ?? null, gap, checked, dependsOn, alternatives, decisionNeeded }, e.id);
    await uow.appendLedger(parent.case_id, { kind: 'question_relayed', body: { taskId: child.id, questionId, to: parent.id } });
    // A parent that is running, or parked on something of its own, sees the note when it next
    // runs; one that parks on its children meanwhile is woken by the sweep (wakeDue).
    if (parent.state === 'parked' && wakes(parent.park_reason, 'child_question')) await wake(uow, parent.id, 'child_question');
    return 'applied';
  };

  /** An operator takes a soft stop back: the request is withdrawn; a task parked on it wakes. */
  const resume: MessageHandler<Of<'task.resume'>> = async (e, uow) => {
    const p = e.payload;
    const bad = await checkOperatorControl(uow, e);
    if (bad !== null) return refuse(env, e, bad);
    const task = await lockTask(uow, p.taskId);
    if (!task || task.case_id !== e.caseId) return 'ignored';
    const action = resumeAction(task);
    if (action === 'nothing') return 'ignored';
    await withdrawSoftCancelRequest(uow, task.id);
    // No note on a wake: the task goes on from its checkpoint exactly as it would have without
    // the stop (its next request may already be journalled); the ledger records who resumed it.
    const woke = action === 'wake' && (await wake(uow, task.id, 'soft_stop_lifted'));
    await uow.appendLedger(task.case_id, { kind: 'task_resumed', body: { taskId: task.id, requestedBy: p.requestedBy ?? null, woke, reason: p.reason ?? null } });
    return 'applied';
  };

  /** An operator's budget top-up (intake checked the role and recorded it): the limits grow; a budget park wakes. */
  const toppedUp: MessageHandler<Of<'budget.topped_up'>> = async (e, uow) => {
    const p = e.payload;
    const bad = await checkOperatorControl(uow, e);
    if (bad !== null) return refuse(env, e, bad);
    const task = await lockTask(uow, p.taskId);
    if (!task || task.case_id !== e.caseId || ended(task)) return 'ignored';
    const budget: BudgetTopUp = p.budget;
    const applied = await applyTopUp(uow, task, budget as Record<string, number>, p.toppedUpBy, { ref: `top-up:${e.id}`, messageId: e.id, reason: p.reason });
    return applied ? 'applied' : 'ignored';
  };

  return { 'question.raised': raised, 'task.resume': resume, 'budget.topped_up': toppedUp };
}
