/**
 * The question protocol on the asking side (seed 004 §11.3, §11.4): only the root asks a human;
 * a sub-agent's question goes to its immediate parent. Runs in the unit of work of the turn that
 * parks through it, under the task's fence — the question and the answers exist exactly when the
 * checkpoint that produced them does.
 *
 *   root asks         → a QUESTIONS row (asked by the root): the human answers it over HTTP
 *                       (`question.answered` from intake), which wakes exactly that task.
 *   sub-agent asks    → parked `question` with {questionId, askedOf: parent} and a
 *                       `question.raised` to the parent (no QUESTIONS row: nobody human is asked).
 *                       The parent's handler notes it and wakes a parent waiting on its children.
 *   parent answers    → `wait {…, answers: [{questionId, answer}]}`: a `question.answered` from
 *                       the parent to the one child parked on that question and asking this
 *                       parent; its handler wakes exactly that child. An answer naming no such
 *                       child is refused and recorded.
 *   parent cannot     → it asks its own question the same way (up the graph; at the root, to a
 *   decide              human) and answers the child once it knows.
 */
import { newId } from '@everdict/contracts';
import type { ParkReason } from '@everdict/contracts';
import type { ArmedWait } from '@everdict/agent-runtime';
import { askQuestion, childWaitingOn } from '@everdict/store';
import type { FenceToken, TaskRow, UnitOfWork } from '@everdict/store';
import { send } from './envelopes.js';

interface Asker {
  readonly task: TaskRow;
  readonly token: FenceToken;
  readonly rootTaskId: string;
}

/** The `answeredBy` of an answer an agent gives: the answering task, never a person. */
export const agentPrincipal = (taskId: string) => `task:${taskId}`;

const MAX = 4000;
const clip = (s: string) => s.slice(0, MAX);

/**
 * Answers the held task's sub-agents' questions and puts its own question, as the park needs.
 * Returns the id of a question put to a HUMAN (null: none) and what the park detail gains.
 */
export async function questionProtocol(uow: UnitOfWork, a: Asker, parkReason: ParkReason, wait: ArmedWait | null): Promise<{ humanQuestionId: string | null; detail: Record<string, unknown> }> {
  const { task, token } = a;
  for (const ans of wait?.answers ?? []) await answerChild(uow, a, ans.questionId, ans.answer);
  if (parkReason !== 'question') return { humanQuestionId: null, detail: {} };

  const q = wait?.question ?? null;
  const reason = wait?.reason ?? 'the agent needs an answer';
  const questionId = newId();
  if (task.parent_id === null) {
    await askQuestion(uow, token, {
      id: questionId,
      caseId: task.case_id,
      taskId: task.id,
      askedBy: a.rootTaskId,
      kind: 'agent',
      gap: q?.gap ?? reason,
      checked: q ? [q.checked] : [],
      dependsOn: q ? [q.dependsOn] : [],
      alternatives: q ? [...q.alternatives] : [],
      decisionNeeded: q?.decisionNeeded ?? reason,
    });
    return { humanQuestionId: questionId, detail: { questionId } };
  }
  // A sub-agent asks its parent (§11.3); the parent decides whether a human is needed.
  await send(
    uow,
    'question.raised',
    {
      questionId,
      taskId: task.id,
      parentTaskId: task.parent_id,
      reason: clip(reason),
      gap: clip(q?.gap || reason),
      checked: clip(q?.checked ?? ''),
      dependsOn: clip(q?.dependsOn ?? ''),
      alternatives: (q?.alternatives ?? []).slice(0, 50).map(clip),
      decisionNeeded: clip(q?.decisionNeeded || reason),
    },
    { caseId: task.case_id, from: task, fence: token },
  );
  await uow.appendLedger(task.case_id, { kind: 'question_raised', body: { taskId: task.id, questionId, askedOf: task.parent_id } });
  return { humanQuestionId: null, detail: { questionId, askedOf: task.parent_id } };
}

async function answerChild(uow: UnitOfWork, a: Asker, questionId: string, answer: string): Promise<void> {
  const { task, token } = a;
  const child = await childWaitingOn(uow, task.id, questionId);
  if (!child) {
    await uow.appendLedger(task.case_id, { kind: 'question_answer_refused', body: { taskId: task.id, questionId, why: 'no sub-agent of this task waits on that question' } });
    return;
  }
  await send(uow, 'question.answered', { questionId, taskId: child.id, answer: answer.slice(0, 16000), answeredBy: agentPrincipal(task.id) }, { caseId: task.case_id, from: task, fence: token });
  await uow.appendLedger(task.case_id, { kind: 'question_answer_sent', body: { taskId: task.id, questionId, childTaskId: child.id } });
}
