/**
 * Intake's reads and writes: the case view of the HTTP API, a question's owner,
 * the mailbox cursors behind intake-sources' MailboxCursorStore port and the fleet counts.
 * Ownership (which customer a principal sees) is decided by the caller; these return the
 * customer of every row so it can.
 */
import type { Queryable } from './db.js';
import { loadCaseCosts } from './costs.js';
import type { TaskCostRow } from './costs.js';
import { loadCaseDeadlines } from './deadlines.js';
import type { CaseDeadlines } from './deadlines.js';
import { loadCasePlanRevisions } from './planView.js';
import type { CasePlanRevisionRow } from './planView.js';
import type { CaseGateRow, CaseListFilter, CaseRow, CaseTaskRow, PlanStepRow, CaseQuestionRow } from './sql/intake.js';
import {
  selectCase,
  selectCaseGates,
  selectCasePlanSteps,
  selectCaseQuestions,
  selectCaseTasks,
  selectCases,
  selectMailboxCursor,
  selectParkedCounts,
  selectQuestion,
  selectTaskStateCounts,
  upsertMailboxCursor,
} from './sql/intake.js';

export type { CaseGateRow, CaseListFilter, CaseRow, CaseTaskRow, PlanStepRow, CaseQuestionRow } from './sql/intake.js';

export async function loadCase(q: Queryable, caseId: string): Promise<CaseRow | undefined> {
  return (await q.query<CaseRow>(selectCase(caseId))).rows[0];
}

/** Newest first, filtered and keyset-paged (selectCases). */
export async function listCases(q: Queryable, f: CaseListFilter): Promise<CaseRow[]> {
  return (await q.query<CaseRow>(selectCases(f))).rows;
}

export interface CaseDetail {
  readonly tasks: CaseTaskRow[];
  readonly planSteps: PlanStepRow[];
  readonly gates: CaseGateRow[];
  readonly questions: CaseQuestionRow[];
  /** Per task: model usage and delivery minutes (costs.ts). */
  readonly costs: TaskCostRow[];
  /** Every plan revision of every task, with its confirmation (planView.ts). */
  readonly planRevisions: CasePlanRevisionRow[];
  /** Deadlines and escalations of the case's gates and questions (deadlines.ts). */
  readonly deadlines: CaseDeadlines;
}

export async function loadCaseDetail(q: Queryable, caseId: string): Promise<CaseDetail> {
  const [tasks, planSteps, gates, questions, costs, planRevisions, deadlines] = await Promise.all([
    q.query<CaseTaskRow>(selectCaseTasks(caseId)),
    q.query<PlanStepRow>(selectCasePlanSteps(caseId)),
    q.query<CaseGateRow>(selectCaseGates(caseId)),
    q.query<CaseQuestionRow>(selectCaseQuestions(caseId)),
    loadCaseCosts(q, caseId),
    loadCasePlanRevisions(q, caseId),
    loadCaseDeadlines(q, caseId),
  ]);
  return { tasks: tasks.rows, planSteps: planSteps.rows, gates: gates.rows, questions: questions.rows, costs, planRevisions, deadlines };
}

/**
 * The question with its case's customer. Intake does not write the answer: the turn-worker's
 * `question.answered` handler records it (first answer wins) in the unit of work that wakes the
 * parked task, so an answer written here first would make that handler ignore the message.
 */
export async function loadQuestion(q: Queryable, questionId: string): Promise<CaseQuestionRow | undefined> {
  return (await q.query<CaseQuestionRow>(selectQuestion(questionId))).rows[0];
}

/** The stored form of intake-sources' MailboxCursor (kept structural: the store does not depend on it). */
interface StoredMailboxCursor {
  uidValidity: number;
  lastUid: number;
  watermark: string | null;
  rescan: { since: string | null; throughUid: number } | null;
}

export async function loadMailboxCursor(q: Queryable, mailboxKey: string): Promise<StoredMailboxCursor | null> {
  const r = (await q.query<{ uid_validity: string; last_uid: string; watermark: string | null; rescan_since: string | null; rescan_through: string | null }>(selectMailboxCursor(mailboxKey))).rows[0];
  if (!r) return null;
  return {
    uidValidity: Number(r.uid_validity),
    lastUid: Number(r.last_uid),
    watermark: r.watermark,
    rescan: r.rescan_through === null ? null : { since: r.rescan_since, throughUid: Number(r.rescan_through) },
  };
}

export async function saveMailboxCursor(q: Queryable, mailboxKey: string, c: StoredMailboxCursor): Promise<void> {
  await q.query(upsertMailboxCursor(mailboxKey, { uidValidity: c.uidValidity, lastUid: c.lastUid, watermark: c.watermark, rescanSince: c.rescan?.since ?? null, rescanThrough: c.rescan?.throughUid ?? null }));
}

export async function fleetCounts(q: Queryable): Promise<{ parked: Record<string, number>; tasks: Record<string, number> }> {
  const [parked, tasks] = await Promise.all([q.query<{ park_reason: string; count: number }>(selectParkedCounts()), q.query<{ state: string; count: number }>(selectTaskStateCounts())]);
  return {
    parked: Object.fromEntries(parked.rows.map((r) => [r.park_reason, r.count])),
    tasks: Object.fromEntries(tasks.rows.map((r) => [r.state, r.count])),
  };
}
