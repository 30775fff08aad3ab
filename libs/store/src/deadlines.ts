/**
 * Durable deadlines of open gates and unanswered questions (issue 13 item 6), on the DATABASE
 * clock. The reconciler fixes a deadline once (created_at + the case type's afterMs), then claims
 * the due ones FOR UPDATE SKIP LOCKED and applies their escalation in the same unit of work that
 * marks them escalated — so any number of reconcilers apply each escalation exactly once.
 *
 * An item is due while `deadline_at <= now()` and it has not been escalated since that deadline
 * was set (`escalated_at IS NULL OR escalated_at < deadline_at`): a re-ask moves the deadline past
 * its own escalation, any other escalation leaves the deadline behind it.
 */
import type { Queryable } from './db.js';
import type { UnitOfWork } from './unitOfWork.js';

/** Channel a console or channel adapter LISTENs on: an escalation was ledgered (payload: case id). */
export const ESCALATION_CHANNEL = 'everdict_escalation';

export type DeadlineSubject = 'gate' | 'question';

/** One case type's deadline for a subject. */
export interface DeadlineRule {
  readonly caseType: string;
  readonly afterMs: number;
}

export interface DueDeadline {
  id: string;
  case_id: string;
  task_id: string;
  case_type: string;
  deadline_at: Date;
  escalations: number;
  /** Gates only: the roles the gate's decisions need (the askers a re-ask re-notifies). */
  roles: string[];
}

const TABLE: Record<DeadlineSubject, { table: string; open: string }> = {
  gate: { table: 'gates', open: "t.state = 'open'" },
  question: { table: 'questions', open: 't.answer IS NULL' },
};

/** Fixes the deadline of open items that have none, from their case type's rule; returns how many. */
export async function stampDeadlines(q: Queryable, subject: DeadlineSubject, rules: readonly DeadlineRule[], limit = 500): Promise<number> {
  if (rules.length === 0) return 0;
  const { table, open } = TABLE[subject];
  const res = await q.query({
    text: `WITH rule AS (SELECT * FROM unnest($1::text[], $2::double precision[]) AS r(case_type, after_ms)),
                todo AS (
                  SELECT t.id, t.created_at + make_interval(secs => rule.after_ms / 1000) AS deadline
                    FROM ${table} t JOIN cases c ON c.id = t.case_id JOIN rule ON rule.case_type = c.case_type
                   WHERE ${open} AND t.deadline_at IS NULL
                   LIMIT $3::int FOR UPDATE OF t SKIP LOCKED)
           UPDATE ${table} t SET deadline_at = todo.deadline FROM todo WHERE t.id = todo.id
        RETURNING t.id`,
    values: [rules.map((r) => r.caseType), rules.map((r) => r.afterMs), limit],
  });
  return res.rows.length;
}

/** Open items past their deadline and not yet escalated for it, locked for this unit of work. */
export async function claimDueDeadlines(uow: UnitOfWork, subject: DeadlineSubject, limit = 50): Promise<DueDeadline[]> {
  const { table, open } = TABLE[subject];
  const roles = subject === 'gate' ? `ARRAY(SELECT DISTINCT d->>'role' FROM jsonb_array_elements(t.required_decisions) d ORDER BY 1)` : `ARRAY[]::text[]`;
  const res = await uow.query<DueDeadline>({
    text: `SELECT t.id, t.case_id, t.task_id, c.case_type, t.deadline_at, t.escalations, ${roles} AS roles
             FROM ${table} t JOIN cases c ON c.id = t.case_id
            WHERE ${open} AND t.deadline_at <= now() AND (t.escalated_at IS NULL OR t.escalated_at < t.deadline_at)
            ORDER BY t.deadline_at
            LIMIT $1::int FOR UPDATE OF t SKIP LOCKED`,
    values: [limit],
  });
  return res.rows;
}

/**
 * Records that an item was escalated; `extendMs` (a re-ask) also moves its deadline to
 * now() + extendMs. Returns the deadline the item now has.
 */
export async function markEscalated(uow: UnitOfWork, subject: DeadlineSubject, id: string, extendMs: number | null): Promise<Date> {
  const { table } = TABLE[subject];
  const res = await uow.query<{ deadline_at: Date }>({
    text: `UPDATE ${table} SET escalated_at = now(), escalations = escalations + 1,
                  deadline_at = CASE WHEN $2::double precision IS NULL THEN deadline_at
                                     ELSE now() + make_interval(secs => $2::double precision / 1000) END
            WHERE id = $1::uuid
        RETURNING deadline_at`,
    values: [id, extendMs],
  });
  return res.rows[0]!.deadline_at;
}

/**
 * Marks a parked task as waiting for an operator: `park_detail.operator` says why and since when.
 * The park reason (and so what wakes the task) is unchanged. Returns whether the task was parked.
 */
export async function parkForOperator(uow: UnitOfWork, taskId: string, reason: string): Promise<boolean> {
  const res = await uow.query({
    text: `UPDATE tasks SET park_detail = COALESCE(park_detail, '{}'::jsonb)
                             || jsonb_build_object('operator', jsonb_build_object('reason', $2::text, 'since', now())),
                  updated_at = now()
            WHERE id = $1::uuid AND state = 'parked'
        RETURNING id`,
    values: [taskId, reason],
  });
  return res.rows.length > 0;
}

/** Wakes console / channel-adapter listeners at commit (payload: the case id). */
export async function notifyEscalation(uow: UnitOfWork, caseId: string): Promise<void> {
  await uow.query({ text: 'SELECT pg_notify($1::text, $2::text)', values: [ESCALATION_CHANNEL, caseId] });
}

/** Deadlines and escalations of a case's gates and questions, for the case view. */
export interface CaseDeadlineRow {
  subject: DeadlineSubject;
  id: string;
  deadline_at: Date | null;
  escalated_at: Date | null;
  escalations: number;
}

/** A parked task an escalation handed to an operator (parkForOperator). */
export interface OperatorParkRow {
  task_id: string;
  reason: string;
  since: string;
}

export interface CaseDeadlines {
  readonly items: CaseDeadlineRow[];
  readonly operatorParks: OperatorParkRow[];
}

export async function loadCaseDeadlines(q: Queryable, caseId: string): Promise<CaseDeadlines> {
  const [items, parks] = await Promise.all([
    q.query<CaseDeadlineRow>({
      text: `SELECT 'gate' AS subject, id, deadline_at, escalated_at, escalations FROM gates WHERE case_id = $1::uuid
             UNION ALL
             SELECT 'question' AS subject, id, deadline_at, escalated_at, escalations FROM questions WHERE case_id = $1::uuid`,
      values: [caseId],
    }),
    q.query<OperatorParkRow>({
      text: `SELECT id AS task_id, park_detail->'operator'->>'reason' AS reason, park_detail->'operator'->>'since' AS since
               FROM tasks WHERE case_id = $1::uuid AND state = 'parked' AND park_detail ? 'operator'`,
      values: [caseId],
    }),
  ]);
  return { items: items.rows, operatorParks: parks.rows };
}
