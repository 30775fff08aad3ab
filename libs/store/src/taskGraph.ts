/**
 * The agent graph and its leases (seed 004 §3, §7, §11.4), as functions over a unit of work or
 * the store. Added for the turn-worker (issue 4); the reconciler reuses the sweeps. Nothing here
 * changes the Store or UnitOfWork classes: writes that a lease holder makes assert its fence
 * first (`uow.requireFence`), writes a message handler makes lock the task row instead.
 */
import type { ParkReason } from '@everdict/contracts';
import type { Queryable } from './db.js';
import {
  answerQuestion,
  cancelTaskTree,
  claimGraphTask,
  countUnreportedChildren,
  insertChildTask,
  insertNote,
  insertPlanConfirmation,
  insertPlanRevision,
  insertQuestion,
  insertVersionDecision,
  lockGraphTask,
  lockQuestion,
  pinNotes,
  projectPlanSteps,
  recordRouteHealth,
  renewLeases,
  requestSoftCancel,
  selectCaseType,
  selectChildWaitingOn,
  selectGraphTask,
  selectLastConfirmedRevision,
  selectPapersNamed,
  selectPlanRevision,
  selectVersionDecision,
  setWakeAt,
  sweepExpiredLeases,
  wakeAskedParents,
  wakeDueTasks,
  wakeParkedTask,
  withdrawSoftCancel,
} from './sql/taskGraph.js';
import type { GraphTaskRow, NewChildTask, NewQuestion, PlanRevisionRow, QuestionRow } from './sql/taskGraph.js';
import type { Store } from './store.js';
import type { FenceToken, UnitOfWork } from './unitOfWork.js';

export type { GraphTaskRow, NewChildTask, NewQuestion, NoteRow, PlanRevisionRow, QuestionRow } from './sql/taskGraph.js';

export async function loadGraphTask(db: Queryable, taskId: string): Promise<GraphTaskRow | undefined> {
  return (await db.query<GraphTaskRow>(selectGraphTask(taskId))).rows[0];
}

/** Locks the task row until COMMIT: handlers that change a task they do not lease serialise here. */
export async function lockTask(uow: UnitOfWork, taskId: string): Promise<GraphTaskRow | undefined> {
  return (await uow.query<GraphTaskRow>(lockGraphTask(taskId))).rows[0];
}

export type UnitClaim =
  | { claimed: true; token: FenceToken; task: GraphTaskRow }
  | { claimed: false; reason: 'not_found' | 'not_claimable' | 'leased' | 'cancelling'; state?: string };

/**
 * Claims the task lease inside the caller's unit of work (the inbox row of the message that
 * asked for it commits with it): a new fence epoch and a lease on the database clock, in one
 * statement. A task that is leased, parked, finished or hard-cancelled is not claimed.
 */
export async function claimTaskInUnit(uow: UnitOfWork, taskId: string, owner: string, ttlMs: number): Promise<UnitClaim> {
  const task = (await uow.query<GraphTaskRow>(claimGraphTask(taskId, owner, ttlMs))).rows[0];
  if (task) return { claimed: true, token: { taskId, owner, epoch: task.fence_epoch }, task };
  const row = (await uow.query<GraphTaskRow>(selectGraphTask(taskId))).rows[0];
  if (!row) return { claimed: false, reason: 'not_found' };
  if (row.state !== 'open' && row.state !== 'running') return { claimed: false, reason: 'not_claimable', state: row.state };
  if (row.cancel_requested === 'hard') return { claimed: false, reason: 'cancelling', state: row.state };
  return { claimed: false, reason: 'leased', state: row.state };
}

/**
 * Renews many leases of one owner in one statement, on the database clock. Returns the task ids
 * still held; every other one is stale (claimed or swept since) and is counted as such.
 */
export async function renewLeaseBatch(store: Store, owner: string, leases: readonly { taskId: string; epoch: number }[], ttlMs: number): Promise<Set<string>> {
  if (leases.length === 0) return new Set();
  const { rows } = await store.db.query<{ id: string }>(renewLeases(owner, leases, ttlMs));
  const held = new Set(rows.map((r) => r.id));
  for (const l of leases) if (!held.has(l.taskId)) store.metrics.staleFence('renew_lease');
  return held;
}

/**
 * The expired-lease sweep, in ONE unit of work with whatever `onExpired` enqueues (the
 * task.runnable outbox row): running tasks whose lease ended on the database clock become open.
 * SKIP LOCKED lets every turn-worker (and the reconciler) sweep concurrently.
 */
export async function sweepLeases(store: Store, opts: { limit: number; onExpired: (uow: UnitOfWork, task: GraphTaskRow) => Promise<void> }): Promise<GraphTaskRow[]> {
  return store.unitOfWork(async (uow) => {
    const { rows } = await uow.query<GraphTaskRow>(sweepExpiredLeases(opts.limit));
    for (const t of rows) await opts.onExpired(uow, t);
    return rows;
  });
}

/**
 * Mechanical wake-ups, with `onWoken` in the same unit of work: health-gated provider/connector
 * parks, and parents parked `children` that a sub-agent's question is waiting on.
 */
export async function wakeDue(store: Store, opts: { limit: number; onWoken: (uow: UnitOfWork, task: GraphTaskRow) => Promise<void> }): Promise<GraphTaskRow[]> {
  return store.unitOfWork(async (uow) => {
    const { rows } = await uow.query<GraphTaskRow>(wakeDueTasks(opts.limit));
    const asked = (await uow.query<GraphTaskRow>(wakeAskedParents(opts.limit))).rows;
    for (const t of [...rows, ...asked]) await opts.onWoken(uow, t);
    return [...rows, ...asked];
  });
}

/** Wakes a task parked for `reason`; undefined when it is not parked for that reason. */
export async function wakeParked(uow: UnitOfWork, taskId: string, reason: ParkReason): Promise<GraphTaskRow | undefined> {
  return (await uow.query<GraphTaskRow>(wakeParkedTask(taskId, reason))).rows[0];
}

/** Parks under the fence and arms the backoff timer the wake sweep honours. */
export async function parkWithBackoff(uow: UnitOfWork, token: FenceToken, reason: ParkReason, detail: unknown, backoffMs: number): Promise<void> {
  await uow.transitionTask(token, { state: 'parked', parkReason: reason, parkDetail: detail });
  await uow.query(setWakeAt(token.taskId, backoffMs));
}

// ------------------------------------------------------------------------------- children

/** Creates a child under the parent's fence; false when the spawn call already created one. */
export async function createChildTask(uow: UnitOfWork, parent: FenceToken, child: NewChildTask): Promise<boolean> {
  await uow.requireFence(parent, 'spawn_child');
  return (await uow.query(insertChildTask(child))).rows.length === 1;
}

/** The sub-agent of `parentId` parked on the question it put to that parent (undefined: none). */
export async function childWaitingOn(db: Queryable, parentId: string, questionId: string): Promise<GraphTaskRow | undefined> {
  return (await db.query<GraphTaskRow>(selectChildWaitingOn(parentId, questionId))).rows[0];
}

export async function caseTypeOf(db: Queryable, caseId: string): Promise<string | undefined> {
  return (await db.query<{ case_type: string }>(selectCaseType(caseId))).rows[0]?.case_type;
}

/** Papers of a case a ref may name (exact name, or a stored result's ref), with their bytes. */
export async function papersNamed(db: Queryable, caseId: string, ref: string): Promise<{ name: string; bytes: Buffer }[]> {
  return (await db.query<{ name: string; bytes: Buffer }>(selectPapersNamed(caseId, ref))).rows;
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
export async function cancelTree(uow: UnitOfWork, taskId: string): Promise<GraphTaskRow[]> {
  return (await uow.query<GraphTaskRow>(cancelTaskTree(taskId))).rows;
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
