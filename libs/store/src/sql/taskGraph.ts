/**
 * Statements of the agent graph (seed 004 §3, §11.3, §11.4): leases in bulk (renewal, the
 * expired-lease sweep), wake-ups, children, notes, questions, plan revisions and their
 * confirmations, cancellation, version decisions and the provider health signal.
 *
 * Lease time is ALWAYS the database clock. Statements that pick many rows lock them with
 * SKIP LOCKED, so any number of sweepers run at once without blocking each other or a claim.
 */
import type { ParkReason } from '@everdict/contracts';
import type { Sql } from '../db.js';

/** The task columns a turn-worker needs to run, stamp and route a task's messages. */
export interface GraphTaskRow {
  id: string;
  case_id: string;
  parent_id: string | null;
  root_task_id: string | null;
  depth: number;
  ancestry: string[];
  profile: string;
  profile_version: string;
  objective: unknown;
  context: unknown;
  state: string;
  park_reason: ParkReason | null;
  park_detail: unknown;
  row_version: number;
  fence_epoch: number;
  lease_owner: string | null;
  cancel_requested: 'hard' | 'soft' | null;
  budget_limit_minutes: string | null;
  spawn_call_id: string | null;
}

/** The GraphTaskRow columns, qualified with a table alias. */
function graphColumns(a = 'tasks'): string {
  return `${a}.id, ${a}.case_id, ${a}.parent_id, ${a}.root_task_id, ${a}.depth, ${a}.ancestry::text[] AS ancestry, ${a}.profile,
          ${a}.profile_version, ${a}.objective, ${a}.context, ${a}.state, ${a}.park_reason, ${a}.park_detail, ${a}.row_version,
          ${a}.fence_epoch, ${a}.lease_owner, ${a}.cancel_requested, ${a}.budget_limit_minutes, ${a}.spawn_call_id`;
}

export function selectGraphTask(taskId: string): Sql {
  return { name: 'ev_select_graph_task', text: `SELECT ${graphColumns()} FROM tasks WHERE id = $1::uuid`, values: [taskId] };
}

/** Same, locking the row for the rest of the unit of work (message handlers serialise on it). */
export function lockGraphTask(taskId: string): Sql {
  return { name: 'ev_lock_graph_task', text: `SELECT ${graphColumns()} FROM tasks WHERE id = $1::uuid FOR UPDATE`, values: [taskId] };
}

/**
 * Claim inside a unit of work, returning the task: a new fence epoch, the lease on the database
 * clock. Same conditions as the store's claim statement (open or running with an expired lease);
 * concurrent claimers serialise on the row and every loser re-evaluates the WHERE against the
 * winner's row and updates nothing. A hard-cancelled task is never claimed.
 */
export function claimGraphTask(taskId: string, owner: string, ttlMs: number): Sql {
  return {
    name: 'ev_claim_graph_task',
    text: `UPDATE tasks
              SET fence_epoch = fence_epoch + 1, row_version = row_version + 1,
                  lease_owner = $2::text, lease_until = now() + make_interval(secs => $3::double precision / 1000),
                  state = 'running', updated_at = now()
            WHERE id = $1::uuid
              AND state IN ('open', 'running')
              AND (lease_until IS NULL OR lease_until <= now())
              AND cancel_requested IS DISTINCT FROM 'hard'
        RETURNING ${graphColumns()}`,
    values: [taskId, owner, ttlMs],
  };
}

/**
 * Renews many leases in one statement; only rows still held at the named epoch are extended.
 * A task missing from the result has been claimed or swept since: its holder is stale.
 */
export function renewLeases(owner: string, leases: readonly { taskId: string; epoch: number }[], ttlMs: number): Sql {
  return {
    name: 'ev_renew_leases',
    text: `UPDATE tasks t SET lease_until = now() + make_interval(secs => $4::double precision / 1000)
             FROM unnest($1::uuid[], $2::bigint[]) AS x(id, epoch)
            WHERE t.id = x.id AND t.fence_epoch = x.epoch AND t.lease_owner = $3::text AND t.state = 'running'
        RETURNING t.id`,
    values: [leases.map((l) => l.taskId), leases.map((l) => l.epoch), owner, ttlMs],
  };
}

/**
 * The expired-lease sweep: running tasks whose lease ended on the database clock become open
 * again (lease cleared, row version bumped), so the dead holder's fenced writes fail and the
 * next claim takes a new epoch. The caller enqueues task.runnable in the same unit of work.
 */
export function sweepExpiredLeases(limit: number): Sql {
  return {
    name: 'ev_sweep_expired_leases',
    text: `WITH expired AS (
             SELECT id FROM tasks
              WHERE state = 'running' AND lease_until < now()
              ORDER BY lease_until
              LIMIT $1::int
              FOR UPDATE SKIP LOCKED
           )
           UPDATE tasks t
              SET state = 'open', lease_owner = NULL, lease_until = NULL, row_version = t.row_version + 1, updated_at = now()
             FROM expired
            WHERE t.id = expired.id
        RETURNING ${graphColumns('t')}`,
    values: [limit],
  };
}

/**
 * Health-gated wake-up of provider/connector parks: the backoff has elapsed, or the route the
 * task waits on has answered successfully since the task parked (the health signal). The park
 * detail stays on the row, so the next park knows which attempt it is (the backoff doubles).
 */
export function wakeDueTasks(limit: number): Sql {
  return {
    name: 'ev_wake_due_tasks',
    text: `WITH due AS (
             SELECT t.id FROM tasks t
              WHERE t.state = 'parked' AND t.park_reason IN ('provider_down', 'connector_down') AND t.wake_at IS NOT NULL
                AND (t.wake_at <= now()
                     OR EXISTS (SELECT 1 FROM route_health h
                                 WHERE h.route = t.park_detail->>'route' AND h.last_ok_at > t.parked_at))
              ORDER BY t.wake_at
              LIMIT $1::int
              FOR UPDATE SKIP LOCKED
           )
           UPDATE tasks t
              SET state = 'open', park_reason = NULL, parked_at = NULL, wake_at = NULL,
                  row_version = t.row_version + 1, updated_at = now()
             FROM due
            WHERE t.id = due.id
        RETURNING ${graphColumns('t')}`,
    values: [limit],
  };
}

/**
 * A parent parked `children` while a sub-agent's question was on its way (the parent was still
 * running when `question.raised` arrived, so the handler could not wake it) wakes here: a
 * question put to a task is never left waiting behind that task's own wait for its children.
 * Driven by the open-notes index, so it costs nothing while no question is pending.
 */
export function wakeAskedParents(limit: number): Sql {
  return {
    name: 'ev_wake_asked_parents',
    text: `WITH due AS (
             SELECT t.id FROM tasks t
              WHERE t.state = 'parked' AND t.park_reason = 'children'
                AND t.id IN (SELECT n.task_id FROM task_notes n WHERE n.consumed_turn IS NULL AND n.kind = 'question')
              LIMIT $1::int
              FOR UPDATE SKIP LOCKED
           )
           UPDATE tasks t
              SET state = 'open', park_reason = NULL, park_detail = NULL, parked_at = NULL, wake_at = NULL,
                  row_version = t.row_version + 1, updated_at = now()
             FROM due
            WHERE t.id = due.id
        RETURNING ${graphColumns('t')}`,
    values: [limit],
  };
}

/** A parked task whose reason matches becomes open (runnable). Nothing happens otherwise. */
export function wakeParkedTask(taskId: string, reason: ParkReason): Sql {
  return {
    name: 'ev_wake_parked_task',
    text: `UPDATE tasks SET state = 'open', park_reason = NULL, park_detail = NULL, parked_at = NULL, wake_at = NULL,
                  row_version = row_version + 1, updated_at = now()
            WHERE id = $1::uuid AND state = 'parked' AND park_reason = $2::text
        RETURNING ${graphColumns()}`,
    values: [taskId, reason],
  };
}

/** Sets the backoff of a task the caller just parked (same unit of work, row locked). */
export function setWakeAt(taskId: string, afterMs: number): Sql {
  return {
    name: 'ev_set_wake_at',
    text: `UPDATE tasks SET wake_at = now() + make_interval(secs => $2::double precision / 1000) WHERE id = $1::uuid AND state = 'parked'`,
    values: [taskId, afterMs],
  };
}

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
    text: `SELECT ${graphColumns()} FROM tasks
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
    text: `SELECT p.name, r.bytes FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
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
        RETURNING ${graphColumns()}`,
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
