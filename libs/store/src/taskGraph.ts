/**
 * The agent graph (seed 004 §3, §7, §11.3), as functions over a unit of work or the store:
 * children, notes, questions, plan revisions, cancellation, version decisions and the provider
 * health signal. The task itself — its row, lease, transitions and wakes — is the task family
 * (tasks.ts). Writes that a lease holder makes assert its fence first (`uow.requireFence`),
 * writes a message handler makes lock the task row instead (`lockTask`).
 */
import type { Queryable } from './db.js';
import { PaperMissing } from './errors.js';
import {
  answerQuestion,
  cancelTaskTree,
  countUnreportedChildren,
  insertChildTask,
  insertNote,
  insertPlanConfirmation,
  insertPlanRevision,
  insertQuestion,
  insertVersionDecision,
  lockQuestion,
  pinNotes,
  projectPlanSteps,
  recordRouteHealth,
  requestSoftCancel,
  selectCaseType,
  selectChildWaitingOn,
  selectLastConfirmedRevision,
  selectPapersNamed,
  selectPlanRevision,
  selectVersionDecision,
  withdrawSoftCancel,
} from './sql/taskGraph.js';
import type { NewChildTask, NewQuestion, PlanRevisionRow, QuestionRow } from './sql/taskGraph.js';
import type { TaskRow } from './sql/tasks.js';
import type { FenceToken, UnitOfWork } from './unitOfWork.js';

export type { NoteRow } from './sql/taskGraph.js';

// ------------------------------------------------------------------------------- children

/** Creates a child under the parent's fence; false when the spawn call already created one. */
export async function createChildTask(uow: UnitOfWork, parent: FenceToken, child: NewChildTask): Promise<boolean> {
  await uow.requireFence(parent, 'spawn_child');
  return (await uow.query(insertChildTask(child))).rows.length === 1;
}

/** The sub-agent of `parentId` parked on the question it put to that parent (undefined: none). */
export async function childWaitingOn(db: Queryable, parentId: string, questionId: string): Promise<TaskRow | undefined> {
  return (await db.query<TaskRow>(selectChildWaitingOn(parentId, questionId))).rows[0];
}

export async function caseTypeOf(db: Queryable, caseId: string): Promise<string | undefined> {
  return (await db.query<{ case_type: string }>(selectCaseType(caseId))).rows[0]?.case_type;
}

/** Papers of a case a ref may name (exact name, or a stored result's ref), with their bytes. */
export async function papersNamed(db: Queryable, caseId: string, ref: string): Promise<{ name: string; bytes: Buffer }[]> {
  const rows = (await db.query<{ name: string; bytes: Buffer | null }>(selectPapersNamed(caseId, ref))).rows;
  // A manifest whose history block is gone reassembles to NULL: say which paper, never hand back nothing.
  const damaged = rows.find((r) => r.bytes === null);
  if (damaged) throw new PaperMissing(damaged.name);
  return rows as { name: string; bytes: Buffer }[];
}

/** Children whose report has not reached the parent (see countUnreportedChildren). */
export async function unreportedChildren(uow: UnitOfWork, parentId: string): Promise<number> {
  return (await uow.query<{ n: number }>(countUnreportedChildren(parentId))).rows[0]?.n ?? 0;
}

// ------------------------------------------------------------------------------- notes

/** Adds a note for a task's next turn; its seq, or null when this source message already added one. */
export async function addNote(uow: UnitOfWork, taskId: string, kind: string, body: unknown, sourceMessageId: string | null): Promise<number | null> {
  return (await uow.query<{ seq: number }>(insertNote(taskId, kind, body, sourceMessageId))).rows[0]?.seq ?? null;
}

/** Pins notes to the turn whose request carries them (written with that turn's intent). */
export async function pinNotesToTurn(uow: UnitOfWork, token: FenceToken, turn: number, seqs: readonly number[]): Promise<void> {
  if (seqs.length === 0) return;
  await uow.requireFence(token, 'pin_notes');
  await uow.query(pinNotes(token.taskId, turn, seqs));
}

// ------------------------------------------------------------------------------- questions

export async function askQuestion(uow: UnitOfWork, token: FenceToken, q: NewQuestion): Promise<void> {
  await uow.requireFence(token, 'ask_question');
  await uow.query(insertQuestion(q));
}

export async function lockQuestionRow(uow: UnitOfWork, questionId: string): Promise<QuestionRow | undefined> {
  return (await uow.query<QuestionRow>(lockQuestion(questionId))).rows[0];
}

export async function recordAnswer(uow: UnitOfWork, questionId: string, answer: string, answeredBy: string): Promise<boolean> {
  return (await uow.query(answerQuestion(questionId, answer, answeredBy))).rows.length === 1;
}

// ------------------------------------------------------------------------------- plans

/** An immutable plan revision of the task holding `token` (expected = revision - 1, CHECKed). */
export async function recordPlanRevision(uow: UnitOfWork, token: FenceToken, r: { revision: number; planHash: string; steps: unknown; rowVersion: number; paperId?: string | null }): Promise<void> {
  await uow.requireFence(token, 'plan_revision');
  await uow.query(insertPlanRevision({ taskId: token.taskId, revision: r.revision, planHash: r.planHash, steps: r.steps, submittedBy: token.taskId, rowVersion: r.rowVersion, paperId: r.paperId ?? null }));
}

export async function loadPlanRevision(uow: UnitOfWork, taskId: string, revision: number): Promise<PlanRevisionRow | undefined> {
  return (await uow.query<PlanRevisionRow>(selectPlanRevision(taskId, revision))).rows[0];
}

export async function lastConfirmedRevision(uow: UnitOfWork, taskId: string): Promise<number> {
  return (await uow.query<{ revision: number }>(selectLastConfirmedRevision(taskId))).rows[0]?.revision ?? 0;
}

/** Records a parent's confirmation and projects the plan's steps (the current plan is a query). */
export async function confirmPlanRevision(
  uow: UnitOfWork,
  c: { taskId: string; revision: number; confirmedBy: string; planHash: string; messageId: string | null; steps: readonly { stepId: string; title: string; dependsOn: readonly string[] }[] },
): Promise<boolean> {
  const { rows } = await uow.query(insertPlanConfirmation(c));
  if (rows.length === 0) return false;
  await uow.query(projectPlanSteps(c.taskId, c.revision, c.steps));
  return true;
}

// ------------------------------------------------------------------------------- cancellation

/** Hard cancel of a task and its unfinished descendants; returns the rows it cancelled. */
export async function cancelTree(uow: UnitOfWork, taskId: string): Promise<TaskRow[]> {
  return (await uow.query<TaskRow>(cancelTaskTree(taskId))).rows;
}

export async function softCancel(uow: UnitOfWork, taskId: string): Promise<boolean> {
  return (await uow.query(requestSoftCancel(taskId))).rows.length === 1;
}

/** Withdraws a pending soft cancel; false when none was pending (a hard one is never withdrawn). */
export async function withdrawSoftCancelRequest(uow: UnitOfWork, taskId: string): Promise<boolean> {
  return (await uow.query(withdrawSoftCancel(taskId))).rows.length === 1;
}

// ------------------------------------------------------------------------------- versions, health

export async function versionDecision(db: Queryable, taskId: string, versionsHash: string): Promise<{ decision: 'continue' | 'park'; decided_by: string } | undefined> {
  return (await db.query<{ decision: 'continue' | 'park'; decided_by: string }>(selectVersionDecision(taskId, versionsHash))).rows[0];
}

export async function recordVersionDecision(uow: UnitOfWork, d: { taskId: string; versionsHash: string; decision: 'continue' | 'park'; decidedBy: string; changed: readonly string[] }): Promise<void> {
  await uow.query(insertVersionDecision(d));
}

export async function reportRouteHealth(db: Queryable, route: string, ok: boolean): Promise<void> {
  await db.query(recordRouteHealth(route, ok));
}
