/**
 * Per-case caps at the claim (seed 004 §11.5), distinct from budget: a case type's
 * `caps.workerSlots` bounds how many tasks of one case hold a live lease at once. A claim beyond
 * it is not taken: the task parks `capacity` with a backoff timer (contracts' PARK_CLASSES), the
 * sweep wakes it, and the next claim tries again — it waits, it is never failed.
 *
 * Invariants:
 * - The count and the claim are exact across workers: every capped claim first takes the case's
 *   transaction-scoped slot lock, then counts and claims in the NEXT statement, so its snapshot
 *   sees every claim committed under the lock before it.
 * - The lock is only ever TRIED, never waited for: a unit of work may claim tasks of several
 *   cases (batched deliveries), and waiting would let two batches deadlock. A claimer that does
 *   not get it parks `capacity` like one that found the cap full (another claim of the case is
 *   in flight); the backoff retries it.
 * - A case type without a cap costs nothing extra: no lookup, no lock.
 *
 * `caps.externalCallsPerMinute` is admitted per call (`admitExternalCall`): a sliding window of
 * the case's started external calls over the last minute, on the database clock. The admission
 * is its own short transaction holding nothing else, so it may WAIT for the case's rate lock;
 * count and insert follow the lock in a later statement, so two workers never both take the
 * last place. A call refused is told when the oldest call in the window leaves it.
 */
import type { CapacityWait } from '@everdict/contracts';
import type { Db, Queryable, Sql } from './db.js';

/** What the claim needs to know about caps (the turn-worker builds it from the fleet config). */
export interface ClaimCaps {
  /** True when some case type declares caps.workerSlots (false: claims skip the lookup). */
  readonly any: boolean;
  /** caps.workerSlots of a case type, or null for none. */
  workerSlots(caseType: string): number | null;
  /** The backoff timer of a `capacity` park, in ms. */
  readonly retryMs: number;
}

/** The park detail of a `capacity` park. */
export interface CapacityDetail {
  readonly cap: 'workerSlots';
  readonly limit: number;
  /** `full`: the cap's count was reached; `contended`: another claim of the case held the slot lock. */
  readonly why: 'full' | 'contended';
}

export function caseOfTask(taskId: string): Sql {
  return {
    name: 'ev_caps_case_of_task',
    text: `SELECT t.case_id, c.case_type FROM tasks t JOIN cases c ON c.id = t.case_id WHERE t.id = $1::uuid`,
    values: [taskId],
  };
}

/** The case's slot lock, held to the end of the unit of work; never waits (see above). */
export function trySlotLock(caseId: string): Sql {
  return {
    name: 'ev_caps_try_slot_lock',
    text: `SELECT pg_try_advisory_xact_lock(hashtextextended('everdict:slots:' || $1::text, 0)) AS locked`,
    values: [caseId],
  };
}

/**
 * Parks a task whose claim the cap refused — only if it is still exactly as claimable as the
 * claim found it (open, or running with an ended lease; not hard-cancelled). It holds no lease
 * afterwards, so a stale holder's fenced writes fail; the timer is armed on the database clock.
 */
export function parkForCapacity(taskId: string, detail: CapacityDetail, retryMs: number): Sql {
  return {
    name: 'ev_caps_park_for_capacity',
    text: `UPDATE tasks
              SET state = 'parked', park_reason = 'capacity', park_detail = $2::jsonb,
                  parked_at = now(), wake_at = now() + make_interval(secs => $3::double precision / 1000),
                  lease_owner = NULL, lease_until = NULL,
                  row_version = row_version + 1, updated_at = now()
            WHERE id = $1::uuid
              AND state IN ('open', 'running')
              AND (lease_until IS NULL OR lease_until <= now())
              AND cancel_requested IS DISTINCT FROM 'hard'
        RETURNING case_id`,
    values: [taskId, JSON.stringify(detail), retryMs],
  };
}

/** What the claim of `taskId` must respect: no cap, a cap to count against, or a busy slot lock. */
export type SlotDecision = { readonly kind: 'none' } | { readonly kind: 'cap'; readonly limit: number } | { readonly kind: 'contended'; readonly limit: number };

/** Looks the task's case type up and, when it is capped, tries the case's slot lock. */
export async function slotDecision(q: Queryable, taskId: string, caps: ClaimCaps | undefined): Promise<SlotDecision> {
  if (!caps?.any) return { kind: 'none' };
  const row = (await q.query<{ case_id: string; case_type: string }>(caseOfTask(taskId))).rows[0];
  const limit = row ? caps.workerSlots(row.case_type) : null;
  if (!row || limit === null) return { kind: 'none' };
  const locked = (await q.query<{ locked: boolean }>(trySlotLock(row.case_id))).rows[0]?.locked === true;
  return locked ? { kind: 'cap', limit } : { kind: 'contended', limit };
}

/** Parks the task `capacity`; true when it did (false: the task was not claimable anyway). */
export async function parkAtCapacity(q: Queryable, taskId: string, detail: CapacityDetail, retryMs: number): Promise<boolean> {
  return ((await q.query(parkForCapacity(taskId, detail, retryMs))).rowCount ?? 0) > 0;
}

// ------------------------------------------------------------------------------- call rate

const RATE_WINDOW = `interval '1 minute'`;

/** The case's rate lock, held to the end of the admission's transaction. */
export function rateLock(caseId: string): Sql {
  return { name: 'ev_caps_rate_lock', text: `SELECT pg_advisory_xact_lock(hashtextextended('everdict:rate:' || $1::text, 0))`, values: [caseId] };
}

/** Calls that left the window are no longer counted; dropping them keeps the count an index range. */
export function pruneExternalCalls(caseId: string): Sql {
  return { name: 'ev_caps_prune_calls', text: `DELETE FROM case_external_calls WHERE case_id = $1::uuid AND at <= now() - ${RATE_WINDOW}`, values: [caseId] };
}

/** Records the call iff fewer than `limit` calls of the case started in the last minute. */
export function admitCallStatement(caseId: string, taskId: string, callId: string, limit: number): Sql {
  return {
    name: 'ev_caps_admit_call',
    text: `INSERT INTO case_external_calls (case_id, task_id, call_id)
           SELECT $1::uuid, $2::uuid, $3::text
            WHERE (SELECT count(*) FROM case_external_calls WHERE case_id = $1::uuid AND at > now() - ${RATE_WINDOW}) < $4::int
        RETURNING at`,
    values: [caseId, taskId, callId, limit],
  };
}

/** Milliseconds until the oldest call in the case's window leaves it (a place frees up). */
export function windowFreesIn(caseId: string): Sql {
  return {
    name: 'ev_caps_window_frees_in',
    text: `SELECT GREATEST(0, ceil(extract(epoch FROM (min(at) + ${RATE_WINDOW} - now())) * 1000))::int AS ms
             FROM case_external_calls WHERE case_id = $1::uuid AND at > now() - ${RATE_WINDOW}`,
    values: [caseId],
  };
}

/**
 * Admits one external call of `taskId` under its case type's `externalCallsPerMinute`
 * (`limitOf`): null when the call may start (it is counted from now), else the wait.
 */
export async function admitExternalCall(db: Db, taskId: string, callId: string, limitOf: (caseType: string) => number | null): Promise<CapacityWait | null> {
  return db.transaction(async (tx) => {
    const row = (await tx.query<{ case_id: string; case_type: string }>(caseOfTask(taskId))).rows[0];
    const limit = row ? limitOf(row.case_type) : null;
    if (!row || limit === null) return null;
    await tx.query(rateLock(row.case_id));
    await tx.query(pruneExternalCalls(row.case_id));
    if (((await tx.query(admitCallStatement(row.case_id, taskId, callId, limit))).rowCount ?? 0) > 0) return null;
    const ms = (await tx.query<{ ms: number | null }>(windowFreesIn(row.case_id))).rows[0]?.ms ?? 0;
    // A little past the window's edge, so the retry is not refused by the same oldest call.
    return { cap: 'externalCallsPerMinute', limit, retryAfterMs: (ms ?? 0) + 50 };
  });
}
