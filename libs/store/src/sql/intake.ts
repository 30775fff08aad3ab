/** Intake statements: case views for the HTTP API, question answers, mailbox cursors. */
import type { Sql } from '../db.js';
import type { TaskRow } from './tasks.js';

export interface CaseRow {
  id: string;
  case_type: string;
  state: string;
  /** A parked case's reason class (a task park reason, or `unreconciled`); null otherwise. */
  state_reason: string | null;
  /** When the case entered its state (its age in it). */
  state_since: Date;
  origin_key: string;
  customer: string;
  title: string;
  objective: unknown;
  stop_mode: 'hard' | 'soft' | null;
  created_at: Date;
  updated_at: Date;
}

/** A task as the case view shows it: a projection of the one task row. */
export type CaseTaskRow = Pick<TaskRow, 'id' | 'parent_id' | 'profile' | 'state' | 'park_reason' | 'budget_limit_minutes' | 'budget_used_minutes' | 'created_at' | 'updated_at'>;

export interface PlanStepRow {
  task_id: string;
  step_id: string;
  revision: number;
  title: string;
  depends_on: unknown;
  status: string;
}

export interface CaseGateRow {
  id: string;
  task_id: string;
  state: string;
  operation: string;
  effect_class: string;
  packet_digest: string;
  created_at: Date;
  decided_at: Date | null;
}

export interface CaseQuestionRow {
  id: string;
  case_id: string;
  task_id: string;
  asked_by: string | null;
  gap: string;
  decision_needed: string;
  alternatives: unknown;
  answer: string | null;
  answered_by: string | null;
  created_at: Date;
  answered_at: Date | null;
  customer: string;
}

const CASE_COLUMNS = 'id, case_type, state, state_reason, state_since, origin_key, customer, title, objective, stop_mode, created_at, updated_at';

export function selectCase(caseId: string): Sql {
  return { name: 'ev_intake_case', text: `SELECT ${CASE_COLUMNS} FROM cases WHERE id = $1::uuid`, values: [caseId] };
}

/** The case list's filters; each absent one matches every case. */
export interface CaseListFilter {
  /** The principal's customers; null = every customer. */
  readonly customers: readonly string[] | null;
  readonly limit: number;
  /** A case id from the previous page: continue after it. */
  readonly beforeId?: string | null;
  readonly state?: string | null;
  /** One customer (intersected with `customers`). */
  readonly customer?: string | null;
  /** A parked case's reason class (cases.state_reason). */
  readonly parkReason?: string | null;
  /** Origin key prefix (`api:`, `mail:…`, a ticket source), matched literally. */
  readonly origin?: string | null;
  /** Words of the title, matched literally and case-insensitively. */
  readonly text?: string | null;
}

/** `s` with LIKE's wildcards escaped (the default escape character is the backslash). Pure. */
export function likeLiteral(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/**
 * Newest first, keyset-paged on (created_at, id). Every filter, the principal's customers
 * included, is in SQL, so a page never leaks a row the principal may not see. The cursor is a
 * case id; its (created_at, id) is read in SQL at full precision.
 */
export function selectCases(f: CaseListFilter): Sql {
  return {
    text: `SELECT ${CASE_COLUMNS} FROM cases
            WHERE ($1::text[] IS NULL OR customer = ANY($1::text[]))
              AND ($2::uuid IS NULL OR (created_at, id) < (SELECT b.created_at, b.id FROM cases b WHERE b.id = $2::uuid))
              AND ($3::text IS NULL OR state = $3::text)
              AND ($4::text IS NULL OR customer = $4::text)
              AND ($5::text IS NULL OR (state = 'parked' AND state_reason = $5::text))
              AND ($6::text IS NULL OR origin_key LIKE $6::text || '%')
              AND ($7::text IS NULL OR title ILIKE '%' || $7::text || '%')
            ORDER BY created_at DESC, id DESC
            LIMIT $8::int`,
    values: [
      f.customers,
      f.beforeId ?? null,
      f.state ?? null,
      f.customer ?? null,
      f.parkReason ?? null,
      f.origin == null ? null : likeLiteral(f.origin),
      f.text == null ? null : likeLiteral(f.text),
      f.limit,
    ],
  };
}

export function selectCaseTasks(caseId: string): Sql {
  return {
    name: 'ev_intake_case_tasks',
    text: `SELECT id, parent_id, profile, state, park_reason, budget_limit_minutes::text, budget_used_minutes::text, created_at, updated_at
             FROM tasks WHERE case_id = $1::uuid ORDER BY created_at, id`,
    values: [caseId],
  };
}

export function selectCasePlanSteps(caseId: string): Sql {
  return {
    name: 'ev_intake_case_plan',
    text: `SELECT s.task_id, s.step_id, s.revision, s.title, s.depends_on, s.status
             FROM plan_steps s JOIN tasks t ON t.id = s.task_id
            WHERE t.case_id = $1::uuid ORDER BY s.task_id, s.step_id`,
    values: [caseId],
  };
}

export function selectCaseGates(caseId: string): Sql {
  return {
    name: 'ev_intake_case_gates',
    text: `SELECT id, task_id, state, operation, effect_class, packet_digest, created_at, decided_at
             FROM gates WHERE case_id = $1::uuid ORDER BY created_at, id`,
    values: [caseId],
  };
}

const QUESTION_COLUMNS = `q.id, q.case_id, q.task_id, q.asked_by, q.gap, q.decision_needed, q.alternatives, q.answer,
        q.answered_by, q.created_at, q.answered_at, c.customer`;

export function selectCaseQuestions(caseId: string): Sql {
  return {
    name: 'ev_intake_case_questions',
    text: `SELECT ${QUESTION_COLUMNS} FROM questions q JOIN cases c ON c.id = q.case_id WHERE q.case_id = $1::uuid ORDER BY q.created_at, q.id`,
    values: [caseId],
  };
}

export function selectQuestion(questionId: string): Sql {
  return {
    name: 'ev_intake_question',
    text: `SELECT ${QUESTION_COLUMNS} FROM questions q JOIN cases c ON c.id = q.case_id WHERE q.id = $1::uuid`,
    values: [questionId],
  };
}

export function selectMailboxCursor(mailboxKey: string): Sql {
  return {
    name: 'ev_mailbox_cursor',
    text: 'SELECT uid_validity::text, last_uid::text, watermark, rescan_since, rescan_through::text FROM mailbox_cursors WHERE mailbox_key = $1::text',
    values: [mailboxKey],
  };
}

export function upsertMailboxCursor(mailboxKey: string, c: { uidValidity: number; lastUid: number; watermark: string | null; rescanSince: string | null; rescanThrough: number | null }): Sql {
  return {
    name: 'ev_mailbox_cursor_save',
    text: `INSERT INTO mailbox_cursors (mailbox_key, uid_validity, last_uid, watermark, rescan_since, rescan_through)
           VALUES ($1::text, $2::bigint, $3::bigint, $4::text, $5::text, $6::bigint)
           ON CONFLICT (mailbox_key) DO UPDATE
             SET uid_validity = EXCLUDED.uid_validity, last_uid = EXCLUDED.last_uid, watermark = EXCLUDED.watermark,
                 rescan_since = EXCLUDED.rescan_since, rescan_through = EXCLUDED.rescan_through, updated_at = now()`,
    values: [mailboxKey, c.uidValidity, c.lastUid, c.watermark, c.rescanSince, c.rescanThrough],
  };
}

/** Parked tasks per reason (the `fleet` view). */
export function selectParkedCounts(): Sql {
  return {
    name: 'ev_intake_parked_counts',
    text: `SELECT park_reason, count(*)::int AS count FROM tasks WHERE state = 'parked' GROUP BY park_reason ORDER BY park_reason`,
    values: [],
  };
}

/** Tasks per state (the `fleet` view). */
export function selectTaskStateCounts(): Sql {
  return { name: 'ev_intake_task_counts', text: 'SELECT state, count(*)::int AS count FROM tasks GROUP BY state ORDER BY state', values: [] };
}
