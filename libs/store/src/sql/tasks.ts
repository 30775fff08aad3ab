/**
 * The task family's statements: the row, claim, renewal, the fenced transition (park
 * included), the expired-lease sweep and the wakes. Lease time is ALWAYS the database clock
 * (`now()`), never a worker's. Every write after a claim names the epoch it holds; the WHERE
 * clause is the fence. Statements that pick many rows lock them with SKIP LOCKED, so any number
 * of sweepers run at once without blocking each other or a claim.
 */
import { armsTimer, EverdictError, sqlCheckList, timerReasons, wokenBy } from '@everdict/contracts';
import type { ParkReason, TaskState, WakeCause } from '@everdict/contracts';
import type { Sql } from '../db.js';

/** A task as every reader of it sees it: the columns a worker runs, stamps and routes it by. */
export interface TaskRow {
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
  state: TaskState;
  park_reason: ParkReason | null;
  park_detail: unknown;
  row_version: number;
  fence_epoch: number;
  lease_owner: string | null;
  lease_until: Date | null;
  cancel_requested: 'hard' | 'soft' | null;
  budget_used_minutes: string;
  budget_limit_minutes: string | null;
  spawn_call_id: string | null;
  created_at: Date;
  updated_at: Date;
}

/** The TaskRow columns, qualified with a table alias. */
export function taskColumns(a = 'tasks'): string {
  return `${a}.id, ${a}.case_id, ${a}.parent_id, ${a}.root_task_id, ${a}.depth, ${a}.ancestry::text[] AS ancestry, ${a}.profile,
          ${a}.profile_version, ${a}.objective, ${a}.context, ${a}.state, ${a}.park_reason, ${a}.park_detail, ${a}.row_version,
          ${a}.fence_epoch, ${a}.lease_owner, ${a}.lease_until, ${a}.cancel_requested, ${a}.budget_used_minutes::text AS budget_used_minutes,
          ${a}.budget_limit_minutes::text AS budget_limit_minutes, ${a}.spawn_call_id, ${a}.created_at, ${a}.updated_at`;
}

export function insertTask(t: { id: string; caseId: string; parentId: string | null; profile: string; profileVersion?: string; objective?: unknown; budgetLimitMinutes?: number | null }): Sql {
  return {
    text: `INSERT INTO tasks (id, case_id, parent_id, profile, profile_version, objective, budget_limit_minutes)
           VALUES ($1::uuid, $2::uuid, $3::uuid, $4::text, $5::text, $6::jsonb, $7::numeric)`,
    values: [t.id, t.caseId, t.parentId, t.profile, t.profileVersion ?? '1', JSON.stringify(t.objective ?? {}), t.budgetLimitMinutes ?? null],
  };
}

export function selectTask(taskId: string): Sql {
  return { name: 'ev_select_task', text: `SELECT ${taskColumns()} FROM tasks WHERE id = $1::uuid`, values: [taskId] };
}

/** Same, locking the row for the rest of the unit of work (message handlers serialise on it). */
export function lockTask(taskId: string): Sql {
  return { name: 'ev_lock_task', text: `SELECT ${taskColumns()} FROM tasks WHERE id = $1::uuid FOR UPDATE`, values: [taskId] };
}

// ------------------------------------------------------------------------------- lease

/**
 * Claim: a new fence epoch and the lease on the database clock, returning the task. One winner
 * among any number of concurrent claimers: the row lock serialises them, and under READ
 * COMMITTED each loser re-evaluates the WHERE against the winner's row (its lease is live) and
 * updates nothing. Only an open task, or a running one whose lease ended, is claimable; a
 * hard-cancelled task never is, whatever its state says. With `workerSlots` (the case type's
 * caps.workerSlots) the claim is also refused while that many OTHER tasks of the case hold a
 * live lease; the caller serialises the claims of one case (caps.ts) so the count is exact.
 */
export function claimTask(taskId: string, owner: string, ttlMs: number, workerSlots: number | null = null): Sql {
  return {
    name: 'ev_claim_task_v2',
    text: `WITH t AS (
             UPDATE tasks
                SET ${CLAIM_SET}
              WHERE id = $1::uuid
                AND ${CLAIMABLE}
                AND ($4::int IS NULL
                     OR (SELECT count(*) FROM tasks r
                          WHERE r.case_id = tasks.case_id AND r.id <> tasks.id
                            AND r.state = 'running' AND r.lease_until > now()) < $4::int)
          RETURNING ${taskColumns()}
           )
           ${CLAIMED}`,
    values: [taskId, owner, ttlMs, workerSlots],
  };
}

/**
 * The claim of several tasks in one statement (`ev_claim_task_v2` for each, without per-case
 * caps: the caller has none to respect). The rows are locked first, in task-id order, so two
 * claimers of overlapping sets wait for each other in one order and never deadlock; the update
 * then re-checks each row it locked, as the single claim does. Returns the tasks it claimed.
 */
export function claimTasks(taskIds: readonly string[], owner: string, ttlMs: number): Sql {
  return {
    name: 'ev_claim_tasks',
    text: `WITH l AS (
             SELECT k.id FROM tasks k WHERE k.id = ANY($1::uuid[]) ORDER BY k.id FOR NO KEY UPDATE OF k
           ), t AS (
             UPDATE tasks
                SET ${CLAIM_SET}
               FROM l
              WHERE tasks.id = l.id
                AND ${CLAIMABLE}
          RETURNING ${taskColumns()}
           )
           ${CLAIMED}`,
    values: [taskIds, owner, ttlMs],
  };
}

/** A claim's change: a new fence epoch and the lease ($2 owner, $3 ms) on the database clock. */
const CLAIM_SET = `fence_epoch = tasks.fence_epoch + 1, row_version = tasks.row_version + 1,
                    lease_owner = $2::text, lease_until = now() + make_interval(secs => $3::double precision / 1000),
                    state = 'running', updated_at = now()`;

/** Only an open task, or a running one whose lease ended, is claimable; a hard-cancelled one never is. */
const CLAIMABLE = `tasks.state IN ('open', 'running')
                AND (tasks.lease_until IS NULL OR tasks.lease_until <= now())
                AND tasks.cancel_requested IS DISTINCT FROM 'hard'`;

/** The claimed rows `t` with their case type and whether nothing is journalled, checkpointed or waiting. */
const CLAIMED = `SELECT t.*, c.case_type AS claimed_case_type,
                  NOT EXISTS (SELECT 1 FROM runtime_calls r WHERE r.task_id = t.id)
              AND NOT EXISTS (SELECT 1 FROM turn_checkpoints k WHERE k.task_id = t.id)
              AND NOT EXISTS (SELECT 1 FROM task_notes n WHERE n.task_id = t.id AND n.consumed_turn IS NULL) AS claimed_untouched
             FROM t JOIN cases c ON c.id = t.case_id`;

/** What a claim returns beside the task row: the case type, and whether the task is untouched. */
export interface ClaimedExtras {
  claimed_case_type: string;
  claimed_untouched: boolean;
}

/**
 * Renews many leases of one owner in one statement; only rows still held at the named epoch
 * and still running are extended. A task missing from the result has been claimed or swept
 * since: its holder is stale.
 *
 * The rows are locked first, in task-id order, as a claim of several and a group-commit write's
 * fence lock theirs: a renewal and a turn write of overlapping tasks wait for each other in one
 * order. Updated in the order the plan met them, a renewal could hold one row while waiting for
 * another that a turn write holds, and that write wait for the first: a deadlock, which Postgres
 * breaks only after deadlock_timeout (1 s) by failing one of them, stalling every turn queued
 * behind either. Only rows the owner still holds are locked: a row taken over since is not
 * waited for.
 */
export function renewLeases(owner: string, leases: readonly { taskId: string; epoch: number }[], ttlMs: number): Sql {
  return {
    name: 'ev_renew_leases_v2',
    text: `WITH l AS (
             SELECT k.id FROM tasks k
              WHERE k.id = ANY($1::uuid[]) AND k.lease_owner = $3::text AND k.state = 'running'
              ORDER BY k.id FOR NO KEY UPDATE OF k
           )
           UPDATE tasks t SET lease_until = now() + make_interval(secs => $4::double precision / 1000)
             FROM l JOIN unnest($1::uuid[], $2::bigint[]) AS x(id, epoch) ON x.id = l.id
            WHERE t.id = l.id AND t.fence_epoch = x.epoch AND t.lease_owner = $3::text AND t.state = 'running'
        RETURNING t.id, t.lease_until`,
    values: [leases.map((l) => l.taskId), leases.map((l) => l.epoch), owner, ttlMs],
  };
}

/**
 * Lock the task row for the rest of the unit of work iff the fence still holds. While we hold
 * the lock no claim can bump the epoch, so every later write in the same transaction is safe.
 */
export function lockFence(id: string, owner: string, epoch: number): Sql {
  return {
    name: 'ev_lock_fence',
    text: `SELECT row_version FROM tasks
            WHERE id = $1::uuid AND lease_owner = $2::text AND fence_epoch = $3::bigint
              FOR NO KEY UPDATE`,
    values: [id, owner, epoch],
  };
}

/** Where a fenced transition takes the task: out of the lease, and for a park, why and until when. */
export interface TaskTransition {
  readonly state: Exclude<TaskState, 'running'>;
  readonly parkReason?: ParkReason | null;
  readonly parkDetail?: unknown;
  /** The backoff timer of a park whose class arms one, in ms (absent or null: none). */
  readonly wakeAfterMs?: number | null;
}

/**
 * Fenced transition out of the lease: to open (runnable again), parked, done, failed or
 * cancelled. Releases the lease; keeps the epoch so a late write by this worker stays fenced.
 * A park records its reason, its detail and, for a class with a timer, when the timer ends.
 */
export function transitionTask(id: string, owner: string, epoch: number, to: TaskTransition): Sql {
  const parked = to.state === 'parked';
  const wakeAfterMs = to.wakeAfterMs ?? null;
  // A park without a reason is woken by nothing, and a timer on a class without one never fires
  // (the backoff sweep wakes timer classes only): both are the caller's bug, refused unwritten.
  if (parked && !to.parkReason) throw new EverdictError('invalid_transition', `a park of task ${id} needs a park reason`, { details: { taskId: id } });
  if (wakeAfterMs !== null && !(parked && armsTimer(to.parkReason ?? null))) {
    throw new EverdictError('invalid_transition', `a ${parked ? `${to.parkReason} park` : to.state} transition arms no timer (task ${id})`, { details: { taskId: id } });
  }
  return {
    name: 'ev_transition_task',
    text: `UPDATE tasks
              SET state = $4::text, park_reason = $5::text, park_detail = $6::jsonb,
                  parked_at = CASE WHEN $4::text = 'parked' THEN now() ELSE NULL END,
                  wake_at = CASE WHEN $7::double precision IS NULL THEN NULL ELSE now() + make_interval(secs => $7::double precision / 1000) END,
                  lease_owner = NULL, lease_until = NULL,
                  row_version = row_version + 1, updated_at = now()
            WHERE id = $1::uuid AND lease_owner = $2::text AND fence_epoch = $3::bigint
        RETURNING row_version`,
    values: [id, owner, epoch, to.state, parked ? to.parkReason : null, to.parkDetail === undefined ? null : JSON.stringify(to.parkDetail), wakeAfterMs],
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
        RETURNING ${taskColumns('t')}`,
    values: [limit],
  };
}

// ------------------------------------------------------------------------------- wakes

/**
 * What every wake does to the row `t`: it becomes open (runnable) and its park ends. The detail
 * of a timer class survives (the next park of it counts its attempt from there); any other is
 * cleared.
 */
const WOKEN = `state = 'open', park_reason = NULL,
               park_detail = CASE WHEN t.park_reason IN (${sqlCheckList(timerReasons())}) THEN t.park_detail END,
               parked_at = NULL, wake_at = NULL, row_version = t.row_version + 1, updated_at = now()`;

/**
 * A sweep's wake: the tasks `due` selects (at most $1, rows another sweeper holds skipped) woken
 * in the same statement, so two sweepers never wake one task twice.
 */
function wakeDueText(due: string): string {
  return `WITH due AS (
             ${due}
              LIMIT $1::int
              FOR UPDATE SKIP LOCKED
           )
           UPDATE tasks t SET ${WOKEN}
             FROM due
            WHERE t.id = due.id
        RETURNING ${taskColumns('t')}`;
}

/** A task parked for a reason `cause` wakes becomes open; nothing happens otherwise. */
export function wakeTask(taskId: string, cause: WakeCause): Sql {
  return {
    name: 'ev_wake_task',
    text: `UPDATE tasks t SET ${WOKEN}
            WHERE t.id = $1::uuid AND t.state = 'parked' AND t.park_reason = ANY($2::text[])
        RETURNING ${taskColumns('t')}`,
    values: [taskId, wokenBy(cause)],
  };
}

/**
 * Health-gated backoff (cause `backoff`): a timer park wakes once its timer elapsed, or once the
 * route (provider_down) or connector (connector_down) it waits on has answered successfully
 * since it parked — the health signal, recorded in route_health under the route's name or the
 * connector's (`mcp:<server>` for an MCP server).
 */
export function wakeBackoffElapsed(limit: number): Sql {
  return {
    name: 'ev_wake_backoff_elapsed',
    text: wakeDueText(`SELECT t.id FROM tasks t
              WHERE t.state = 'parked' AND t.park_reason IN (${sqlCheckList(wokenBy('backoff'))}) AND t.wake_at IS NOT NULL
                AND (t.wake_at <= now()
                     OR EXISTS (SELECT 1 FROM route_health h
                                 WHERE h.route = COALESCE(t.park_detail->>'route', t.park_detail->>'connector') AND h.last_ok_at > t.parked_at))
              ORDER BY t.wake_at`),
    values: [limit],
  };
}

/**
 * Cause `child_question`, swept: a task parked on its children while a sub-agent's question was
 * on its way (it was still running when `question.raised` arrived, so the handler could not wake
 * it) wakes here. Driven by the open-notes index, so it costs nothing while no question is pending.
 */
export function wakeAskedParents(limit: number): Sql {
  return {
    name: 'ev_wake_asked_parents',
    text: wakeDueText(`SELECT t.id FROM tasks t
              WHERE t.state = 'parked' AND t.park_reason IN (${sqlCheckList(wokenBy('child_question'))})
                AND t.id IN (SELECT n.task_id FROM task_notes n WHERE n.consumed_turn IS NULL AND n.kind = 'question')`),
    values: [limit],
  };
}
