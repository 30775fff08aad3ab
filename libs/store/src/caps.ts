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

// ------------------------------------------------------------------------------- concurrent holds

/** The caps counted as concurrent uses (a row of case_cap_holds each). */
export type HoldCap = 'modelCalls' | 'estateSessions';

/** One concurrent use to admit: which cap, on which target ('' for a model call), by whom. */
export interface HoldRequest {
  readonly cap: HoldCap;
  /** `system/environment[/account]` for estateSessions; '' for modelCalls. */
  readonly target: string;
  readonly taskId: string;
  /** Unique per use (a call id); re-admitting the same holder replaces its row. */
  readonly holder: string;
}

/** An admitted use: release it when it ends (a no-op when the case type has no such cap). */
export interface Hold {
  release(): Promise<void>;
}

function holdLock(caseId: string, cap: HoldCap, target: string): Sql {
  return {
    name: 'ev_caps_hold_lock',
    text: `SELECT pg_advisory_xact_lock(hashtextextended('everdict:hold:' || $2::text || ':' || $1::text || ':' || $3::text, 0))`,
    values: [caseId, cap, target],
  };
}

/** The task's case, case type and the fence epoch of the lease it runs under now. */
function holderTask(taskId: string): Sql {
  return {
    name: 'ev_caps_holder_task',
    text: `SELECT t.case_id, c.case_type, t.fence_epoch FROM tasks t JOIN cases c ON c.id = t.case_id WHERE t.id = $1::uuid`,
    values: [taskId],
  };
}

/** A hold is live while its task runs under the lease it was taken under (database clock). */
const LIVE_HOLD = `EXISTS (SELECT 1 FROM tasks t WHERE t.id = h.task_id AND t.state = 'running'
                            AND t.fence_epoch = h.fence_epoch AND t.lease_until > now())`;

/** Drops the holds of (case, cap, target) that no longer count (their lease ended or moved on). */
export function pruneDeadHolds(caseId: string, cap: HoldCap, target: string): Sql {
  return {
    name: 'ev_caps_prune_holds',
    text: `DELETE FROM case_cap_holds h WHERE h.case_id = $1::uuid AND h.cap = $2::text AND h.target = $3::text AND NOT ${LIVE_HOLD}`,
    values: [caseId, cap, target],
  };
}

/** Takes the hold iff fewer than `limit` live holds of (case, cap, target) exist. */
export function takeHoldStatement(caseId: string, r: HoldRequest, fenceEpoch: string, limit: number): Sql {
  return {
    name: 'ev_caps_take_hold',
    text: `INSERT INTO case_cap_holds (cap, holder, case_id, target, task_id, fence_epoch)
           SELECT $2::text, $3::text, $1::uuid, $4::text, $5::uuid, $6::bigint
            WHERE (SELECT count(*) FROM case_cap_holds h
                    WHERE h.case_id = $1::uuid AND h.cap = $2::text AND h.target = $4::text AND h.holder <> $3::text) < $7::int
           ON CONFLICT (cap, holder) DO UPDATE SET task_id = EXCLUDED.task_id, fence_epoch = EXCLUDED.fence_epoch, acquired_at = now()
        RETURNING fence_epoch`,
    values: [caseId, r.cap, r.holder, r.target, r.taskId, fenceEpoch, limit],
  };
}

export function releaseHoldStatement(cap: HoldCap, holder: string, fenceEpoch: string): Sql {
  return {
    name: 'ev_caps_release_hold',
    text: `DELETE FROM case_cap_holds WHERE cap = $1::text AND holder = $2::text AND fence_epoch = $3::bigint`,
    values: [cap, holder, fenceEpoch],
  };
}

const NO_HOLD: Hold = { release: async () => undefined };

/**
 * Admits one concurrent use under its case type's limit (`limitOf`): a hold to release, or
 * null when the cap is full right now (nothing was recorded).
 */
export async function admitHold(db: Db, r: HoldRequest, limitOf: (caseType: string) => number | null): Promise<Hold | null> {
  const taken = await db.transaction(async (tx) => {
    const row = (await tx.query<{ case_id: string; case_type: string; fence_epoch: string }>(holderTask(r.taskId))).rows[0];
    const limit = row ? limitOf(row.case_type) : null;
    if (!row || limit === null) return 'uncapped' as const;
    await tx.query(holdLock(row.case_id, r.cap, r.target));
    await tx.query(pruneDeadHolds(row.case_id, r.cap, r.target));
    const ok = ((await tx.query(takeHoldStatement(row.case_id, r, String(row.fence_epoch), limit))).rowCount ?? 0) > 0;
    return ok ? { epoch: String(row.fence_epoch) } : null;
  });
  if (taken === null) return null;
  if (taken === 'uncapped') return NO_HOLD;
  return { release: async () => void (await db.query(releaseHoldStatement(r.cap, r.holder, taken.epoch))) };
}

/** How a refused use waits before it asks again. */
export interface HoldQueue {
  /** Milliseconds between two admissions of a waiting use (a little jitter is added). */
  readonly retryMs: number;
  /** Aborts the wait (the task's lease was lost): the use then throws the signal's reason. */
  readonly signal?: AbortSignal;
  /** Told once per use that had to wait, with how long it waited (metrics, logs). */
  readonly onQueued?: (waitedMs: number) => void;
}

/**
 * Runs `use` under a hold: queues (retrying in place) while the cap is full, releases the hold
 * when `use` settles. A release that fails leaves a row that stops counting with the lease.
 */
export async function withHold<T>(db: Db, r: HoldRequest, limitOf: (caseType: string) => number | null, queue: HoldQueue, use: () => Promise<T>): Promise<T> {
  const started = Date.now();
  let waited = false;
  let hold = await admitHold(db, r, limitOf);
  while (hold === null) {
    waited = true;
    await pause(queue.retryMs + Math.floor(Math.random() * queue.retryMs * 0.5), queue.signal);
    hold = await admitHold(db, r, limitOf);
  }
  if (waited) queue.onQueued?.(Date.now() - started);
  try {
    return await use();
  } finally {
    await hold.release().catch(() => undefined);
  }
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason as Error);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
