/**
 * Task lease and fence statements. Lease time is ALWAYS the database clock (`now()`), never a
 * worker's. Every write after a claim names the epoch it holds; the WHERE clause is the fence.
 */
import type { ParkReason, TaskState } from '@everdict/contracts';
import type { Sql } from '../db.js';

export interface TaskRow {
  id: string;
  case_id: string;
  parent_id: string | null;
  profile: string;
  profile_version: string;
  state: TaskState;
  park_reason: ParkReason | null;
  park_detail: unknown;
  row_version: number;
  fence_epoch: number;
  lease_owner: string | null;
  lease_until: Date | null;
  budget_used_minutes: string;
  budget_limit_minutes: string | null;
}

export function insertTask(t: { id: string; caseId: string; parentId: string | null; profile: string; profileVersion?: string; objective?: unknown; budgetLimitMinutes?: number | null }): Sql {
  return {
    text: `INSERT INTO tasks (id, case_id, parent_id, profile, profile_version, objective, budget_limit_minutes)
           VALUES ($1::uuid, $2::uuid, $3::uuid, $4::text, $5::text, $6::jsonb, $7::numeric)`,
    values: [t.id, t.caseId, t.parentId, t.profile, t.profileVersion ?? '1', JSON.stringify(t.objective ?? {}), t.budgetLimitMinutes ?? null],
  };
}

export function selectTask(id: string): Sql {
  return { text: 'SELECT * FROM tasks WHERE id = $1::uuid', values: [id], name: 'ev_select_task' };
}

/**
 * Claim: one winner among any number of concurrent claimers. The row lock serialises them;
 * under READ COMMITTED each loser re-evaluates the WHERE against the winner's new row_version
 * and updates nothing. A task whose lease is still live is not claimable.
 */
export function claimTask(id: string, owner: string, seenRowVersion: number, ttlMs: number): Sql {
  return {
    name: 'ev_claim_task',
    text: `UPDATE tasks
              SET fence_epoch = fence_epoch + 1, row_version = row_version + 1,
                  lease_owner = $2::text, lease_until = now() + make_interval(secs => $4::double precision / 1000),
                  state = 'running', updated_at = now()
            WHERE id = $1::uuid AND row_version = $3::bigint
              AND state IN ('open', 'running')
              AND (lease_until IS NULL OR lease_until <= now())
        RETURNING fence_epoch, row_version, lease_until`,
    values: [id, owner, seenRowVersion, ttlMs],
  };
}

/** Renew: only the current holder at its epoch, and only while still running. */
export function renewLease(id: string, owner: string, epoch: number, ttlMs: number): Sql {
  return {
    name: 'ev_renew_lease',
    text: `UPDATE tasks SET lease_until = now() + make_interval(secs => $4::double precision / 1000)
            WHERE id = $1::uuid AND lease_owner = $2::text AND fence_epoch = $3::bigint AND state = 'running'
        RETURNING lease_until`,
    values: [id, owner, epoch, ttlMs],
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

/**
 * Fenced transition out of the lease: to open (runnable again), parked, done, failed or
 * cancelled. Releases the lease; keeps the epoch so a late write by this worker stays fenced.
 */
export function transitionTask(id: string, owner: string, epoch: number, to: { state: Exclude<TaskState, 'running'>; parkReason?: ParkReason | null; parkDetail?: unknown }): Sql {
  return {
    name: 'ev_transition_task',
    text: `UPDATE tasks
              SET state = $4::text, park_reason = $5::text, park_detail = $6::jsonb,
                  parked_at = CASE WHEN $4::text = 'parked' THEN now() ELSE NULL END,
                  lease_owner = NULL, lease_until = NULL,
                  row_version = row_version + 1, updated_at = now()
            WHERE id = $1::uuid AND lease_owner = $2::text AND fence_epoch = $3::bigint
        RETURNING row_version`,
    values: [id, owner, epoch, to.state, to.state === 'parked' ? (to.parkReason ?? null) : null, to.parkDetail === undefined ? null : JSON.stringify(to.parkDetail)],
  };
}
