/**
 * Statements of the agent graph (seed 004 §3, §11.3): children, notes, questions, plan
 * revisions and their confirmations, cancellation, version decisions and the provider health
 * signal. The task row itself, its lease, transitions and wakes are the task family's
 * (sql/tasks.ts).
 */
import type { Sql } from '../db.js';
import { taskColumns } from './tasks.js';
import { documentOf } from './journal.js';

// ------------------------------------------------------------------------------- children

export interface NewChildTask {
  readonly id: string;
  readonly caseId: string;
  readonly parentId: string;
  readonly rootTaskId: string;
  readonly depth: number;
  readonly ancestry: readonly string[];
  readonly spawnCallId: string;
  readonly profile: string;
  readonly profileVersion: string;
  readonly objective: unknown;
  readonly context: unknown;
}

/** Idempotent on the spawn call id: a replayed spawn returns no row and creates nothing. */
export function insertChildTask(c: NewChildTask): Sql {
  return {
    name: 'ev_insert_child_task',
    text: `INSERT INTO tasks (id, case_id, parent_id, root_task_id, depth, ancestry, spawn_call_id, profile, profile_version, objective, context)
           VALUES ($1::uuid, $2::uuid, $3::uuid, $4::uuid, $5::int, $6::uuid[], $7::uuid, $8::text, $9::text, $10::jsonb, $11::jsonb)
           ON CONFLICT (spawn_call_id) DO NOTHING
           RETURNING id`,
    values: [c.id, c.caseId, c.parentId, c.rootTaskId, c.depth, c.ancestry, c.spawnCallId, c.profile, c.profileVersion, JSON.stringify(c.objective ?? {}), JSON.stringify(c.context ?? null)],
  };
}

/**
 * The sub-agent of `parentId` parked on question `questionId` that it put to that parent (its
 * park detail names the question and the parent it asked); none when no child waits on it. Not
 * locked: the receiver of the answer re-checks under its own lock.
 */
export function selectChildWaitingOn(parentId: string, questionId: string): Sql {
  return {
    name: 'ev_select_child_waiting_on',
    text: `SELECT ${taskColumns()} FROM tasks
            WHERE parent_id = $1::uuid AND state = 'parked' AND park_reason = 'question'
              AND park_detail->>'questionId' = $2::text AND park_detail->>'askedOf' = $1::text`,
    values: [parentId, questionId],
  };
}

/** The case type of a case (the root task's authority comes from it). */
export function selectCaseType(caseId: string): Sql {
  return { name: 'ev_select_case_type', text: 'SELECT case_type FROM cases WHERE id = $1::uuid', values: [caseId] };
}

/**
 * Papers of a case that `ref` may name, with their head revision's bytes: the paper of that exact
 * name, or — for a stored-result ref (`result:…`) — any task's result paper ending in it. Whether
 * the asking task may read one is decided by the caller from its narrowed context.
 */
export function selectPapersNamed(caseId: string, ref: string): Sql {
  return {
    name: 'ev_select_papers_named',
    text: `SELECT p.name, ${documentOf('r')} AS bytes FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
            WHERE p.case_id = $1::uuid
              AND (p.name = $2::text OR (left($2::text, 7) = 'result:' AND p.name LIKE 'results/%' AND right(p.name, length($2::text) + 1) = '/' || $2::text))
            ORDER BY p.name`,
    values: [caseId, ref],
  };
}

/**
 * How many of a parent's children have not yet reported: no child_report note of theirs is
 * recorded for the parent. A child that has ended but whose task.finished is still on its way
 * counts — its report is what the parent waits for, not its state.
 */
export function countUnreportedChildren(parentId: string): Sql {
  return {
    name: 'ev_count_unreported_children',
    text: `SELECT count(*)::int AS n FROM tasks c
            WHERE c.parent_id = $1::uuid
              AND NOT EXISTS (SELECT 1 FROM task_notes n
                               WHERE n.task_id = $1::uuid AND n.kind = 'child_report' AND n.body->>'childTaskId' = c.id::text)`,
    values: [parentId],
  };
}

// ------------------------------------------------------------------------------- notes

export interface NoteRow {
  seq: number;
  kind: string;
  body: unknown;
  consumed_turn: number | null;
}

/** One note per (task, source message): a redelivered message adds nothing. */
export function insertNote(taskId: string, kind: string, body: unknown, sourceMessageId: string | null): Sql {
  return {
    name: 'ev_insert_note',
    text: `INSERT INTO task_notes (task_id, kind, body, source_message_id) VALUES ($1::uuid, $2::text, $3::jsonb, $4::uuid)
           ON CONFLICT (task_id, source_message_id) DO NOTHING RETURNING seq`,
    values: [taskId, kind, JSON.stringify(body), sourceMessageId],
  };
}

export function pinNotes(taskId: string, turn: number, seqs: readonly number[]): Sql {
  return {
    name: 'ev_pin_notes',
    text: 'UPDATE task_notes SET consumed_turn = $2::int WHERE task_id = $1::uuid AND seq = ANY($3::bigint[]) AND consumed_turn IS NULL',
    values: [taskId, turn, seqs],
  };
}

// ------------------------------------------------------------------------------- questions

export interface NewQuestion {
  readonly id: string;
  readonly caseId: string;
  readonly taskId: string;
  readonly askedBy: string | null;
  readonly kind: 'agent' | 'versions';
  readonly gap: string;
  readonly checked: readonly string[];
  readonly dependsOn: readonly string[];
  readonly alternatives: readonly string[];
  readonly decisionNeeded: string;
}

export function insertQuestion(q: NewQuestion): Sql {
  return {
    name: 'ev_insert_question',
    text: `INSERT INTO questions (id, case_id, task_id, asked_by, kind, gap, checked, depends_on, alternatives, decision_needed)
           VALUES ($1::uuid, $2::uuid, $3::uuid, $4::uuid, $5::text, $6::text, $7::jsonb, $8::jsonb, $9::jsonb, $10::text)`,
    values: [q.id, q.caseId, q.taskId, q.askedBy, q.kind, q.gap, JSON.stringify(q.checked), JSON.stringify(q.dependsOn), JSON.stringify(q.alternatives), q.decisionNeeded],
  };
}

export interface QuestionRow {
  id: string;
  case_id: string;
  task_id: string;
  kind: 'agent' | 'versions';
  answer: string | null;
  answered_by: string | null;
}

export function lockQuestion(questionId: string): Sql {
  return { text: 'SELECT id, case_id, task_id, kind, answer, answered_by FROM questions WHERE id = $1::uuid FOR UPDATE', values: [questionId] };
}

export function answerQuestion(questionId: string, answer: string, answeredBy: string): Sql {
  return {
    text: `UPDATE questions SET answer = $2::text, answered_by = $3::text, answered_at = now() WHERE id = $1::uuid AND answer IS NULL RETURNING id`,
    values: [questionId, answer, answeredBy],
  };
}

// ------------------------------------------------------------------------------- plans

export interface PlanRevisionRow {
  task_id: string;
  revision: number;
  expected_revision: number;
  plan_hash: string;
  steps: unknown;
  submitted_by: string | null;
  row_version: number | null;
}

export function insertPlanRevision(r: { taskId: string; revision: number; planHash: string; steps: unknown; submittedBy: string; rowVersion: number; paperId: string | null }): Sql {
  return {
    name: 'ev_insert_plan_revision',
    text: `INSERT INTO plan_revisions (task_id, revision, expected_revision, plan_hash, paper_id, steps, submitted_by, row_version)
           VALUES ($1::uuid, $2::int, $2::int - 1, $3::text, $4::uuid, $5::jsonb, $6::uuid, $7::bigint)`,
    values: [r.taskId, r.revision, r.planHash, r.paperId, JSON.stringify(r.steps), r.submittedBy, r.rowVersion],
  };
}

export function selectPlanRevision(taskId: string, revision: number): Sql {
  return {
    text: 'SELECT task_id, revision, expected_revision, plan_hash, steps, submitted_by, row_version FROM plan_revisions WHERE task_id = $1::uuid AND revision = $2::int',
    values: [taskId, revision],
  };
}

export function selectLastConfirmedRevision(taskId: string): Sql {
  return { text: 'SELECT COALESCE(max(revision), 0)::int AS revision FROM plan_confirmations WHERE task_id = $1::uuid', values: [taskId] };
}

export function insertPlanConfirmation(c: { taskId: string; revision: number; confirmedBy: string; planHash: string; messageId: string | null }): Sql {
  return {
    text: `INSERT INTO plan_confirmations (task_id, revision, confirmed_by, plan_hash, message_id) VALUES ($1::uuid, $2::int, $3::uuid, $4::text, $5::uuid)
           ON CONFLICT (task_id, revision) DO NOTHING RETURNING revision`,
    values: [c.taskId, c.revision, c.confirmedBy, c.planHash, c.messageId],
  };
}

/**
 * The current plan as a projection: steps of the confirmed revision are upserted (status kept
 * for steps that survive), steps it no longer names are marked dropped.
 */
export function projectPlanSteps(taskId: string, revision: number, steps: readonly { stepId: string; title: string; dependsOn: readonly string[] }[]): Sql {
  return {
    text: `WITH incoming AS (
             SELECT x.step_id, x.title, x.depends_on FROM unnest($3::text[], $4::text[], $5::jsonb[]) AS x(step_id, title, depends_on)
           ), up AS (
             INSERT INTO plan_steps (task_id, step_id, revision, title, depends_on, status)
             SELECT $1::uuid, step_id, $2::int, title, depends_on, 'pending' FROM incoming
             ON CONFLICT (task_id, step_id) DO UPDATE SET revision = EXCLUDED.revision, title = EXCLUDED.title,
                 depends_on = EXCLUDED.depends_on, status = CASE WHEN plan_steps.status = 'dropped' THEN 'pending' ELSE plan_steps.status END, updated_at = now()
             RETURNING step_id
           )
           UPDATE plan_steps SET status = 'dropped', revision = $2::int, updated_at = now()
            WHERE task_id = $1::uuid AND step_id NOT IN (SELECT step_id FROM incoming) AND status <> 'dropped'`,
    values: [taskId, revision, steps.map((s) => s.stepId), steps.map((s) => s.title), steps.map((s) => JSON.stringify(s.dependsOn))],
  };
}

// ------------------------------------------------------------------------------- cancellation

/**
 * Hard cancel: the task and every unfinished descendant become cancelled at once and their
 * fence epoch moves on, so a worker still running one of them can dispatch nothing more.
 */
export function cancelTaskTree(taskId: string): Sql {
  return {
    text: `UPDATE tasks SET state = 'cancelled', park_reason = NULL, park_detail = NULL, parked_at = NULL, wake_at = NULL,
                  fence_epoch = fence_epoch + 1, lease_owner = NULL, lease_until = NULL, cancel_requested = 'hard',
                  row_version = row_version + 1, updated_at = now()
            WHERE (id = $1::uuid OR $1::uuid = ANY(ancestry)) AND state NOT IN ('done', 'failed', 'cancelled')
        RETURNING ${taskColumns()}`,
    values: [taskId],
  };
}

/** Soft cancel: the task parks at its next checkpoint (a running turn finishes first). */
export function requestSoftCancel(taskId: string): Sql {
  return {
    text: `UPDATE tasks SET cancel_requested = 'soft', row_version = row_version + 1, updated_at = now()
            WHERE id = $1::uuid AND state NOT IN ('done', 'failed', 'cancelled') AND cancel_requested IS NULL RETURNING id`,
    values: [taskId],
  };
}

/**
 * An operator takes a soft stop back: the request is withdrawn (a hard cancel is final and stays).
 * Returns the row when a soft request was pending.
 */
export function withdrawSoftCancel(taskId: string): Sql {
  return {
    text: `UPDATE tasks SET cancel_requested = NULL, row_version = row_version + 1, updated_at = now()
            WHERE id = $1::uuid AND cancel_requested = 'soft' AND state NOT IN ('done', 'failed', 'cancelled') RETURNING id`,
    values: [taskId],
  };
}

// ------------------------------------------------------------------------------- versions, health

export function selectVersionDecision(taskId: string, versionsHash: string): Sql {
  return {
    name: 'ev_select_version_decision',
    text: 'SELECT decision, decided_by FROM version_decisions WHERE task_id = $1::uuid AND versions_hash = $2::text',
    values: [taskId, versionsHash],
  };
}

export function insertVersionDecision(d: { taskId: string; versionsHash: string; decision: 'continue' | 'park'; decidedBy: string; changed: readonly string[] }): Sql {
  return {
    text: `INSERT INTO version_decisions (task_id, versions_hash, decision, decided_by, changed) VALUES ($1::uuid, $2::text, $3::text, $4::text, $5::jsonb)
           ON CONFLICT (task_id, versions_hash) DO UPDATE SET decision = EXCLUDED.decision, decided_by = EXCLUDED.decided_by, decided_at = now()`,
    values: [d.taskId, d.versionsHash, d.decision, d.decidedBy, JSON.stringify(d.changed)],
  };
}

export function recordRouteHealth(route: string, ok: boolean): Sql {
  return {
    text: ok
      ? `INSERT INTO route_health (route, last_ok_at) VALUES ($1::text, now()) ON CONFLICT (route) DO UPDATE SET last_ok_at = now()`
      : `INSERT INTO route_health (route, last_failure_at) VALUES ($1::text, now()) ON CONFLICT (route) DO UPDATE SET last_failure_at = now()`,
    values: [route],
  };
}
