/**
 * The task family (DESIGN §4): read, lock, claim, renew, sweep and wake a task — the only ways
 * production and tests alike move a task between the lease and the rest of its life. The
 * fenced transition (park included) is `UnitOfWork.transitionTask`, because it shares the
 * unit of work's fence lock; its statement lives with the others in sql/tasks.ts.
 *
 * Which park a wake ends is contracts' PARK_CLASSES table; writes a lease holder makes assert
 * its fence first, writes a message handler makes lock the task row instead (`lockTask`).
 */
import type { TaskState, WakeCause } from '@everdict/contracts';
import type { Queryable } from './db.js';
import { claimTask as claimStatement, claimTasks as claimManyStatement, lockTask as lockStatement, renewLeases as renewStatement, selectTask, sweepExpiredLeases, wakeAskedParents, wakeBackoffElapsed, wakeTask as wakeStatement } from './sql/tasks.js';
import type { ClaimedExtras, TaskRow } from './sql/tasks.js';
import { refreshCaseState, refreshCaseStateAtCommit } from './caseState.js';
import type { HeadAtCommit } from './caseState.js';
import { parkAtCapacity, slotDecision } from './caps.js';
import type { ClaimCaps } from './caps.js';
import type { Store } from './store.js';
import { UnitOfWork } from './unitOfWork.js';
import type { FenceToken } from './unitOfWork.js';

export type { TaskRow } from './sql/tasks.js';

export async function loadTask(q: Queryable, taskId: string): Promise<TaskRow | undefined> {
  return (await q.query<TaskRow>(selectTask(taskId))).rows[0];
}

/** Locks the task row until COMMIT: handlers that change a task they do not lease serialise here. */
export async function lockTask(uow: UnitOfWork, taskId: string): Promise<TaskRow | undefined> {
  return (await uow.query<TaskRow>(lockStatement(taskId))).rows[0];
}

type TaskClaim =
  | {
      readonly claimed: true;
      readonly token: FenceToken;
      readonly task: TaskRow;
      /** The task's case type (read with the claim). */
      readonly caseType: string;
      /** Nothing journalled, checkpointed or waiting for the task yet: it was just opened or spawned. */
      readonly untouched: boolean;
      /** The case's ledger head as the claim's unit of work commits it (null: a claim outside one). */
      readonly headAtCommit: HeadAtCommit | null;
    }
  | { readonly claimed: false; readonly reason: 'not_found' | 'not_claimable' | 'leased' | 'cancelling' | 'capacity'; readonly state?: TaskState };

/**
 * Claims the task lease: a new fence epoch and a lease on the database clock, in one statement.
 * Given a unit of work, the claim commits with it (a handler's inbox row, a first intent).
 * A task that is leased, parked, finished or hard-cancelled is not claimed; the loser is told
 * why, never thrown at.
 */
export async function claimTask(q: Queryable, taskId: string, owner: string, ttlMs: number, caps?: ClaimCaps): Promise<TaskClaim> {
  // Claimed ahead with the other deliveries of this unit of work (claimTasksAhead): taken once.
  const ahead = q instanceof UnitOfWork ? claimedAhead.get(q) : undefined;
  const early = ahead?.get(taskId);
  if (early !== undefined && early.owner === owner) {
    ahead!.delete(taskId);
    return claimedFrom(q, owner, early.row);
  }
  // Per-case caps (caps.ts): a claim beyond the case type's workerSlots parks the task instead.
  const slots = await slotDecision(q, taskId, caps);
  const claimed = slots.kind === 'contended' ? undefined : (await q.query<TaskRow & ClaimedExtras>(claimStatement(taskId, owner, ttlMs, slots.kind === 'cap' ? slots.limit : null))).rows[0];
  if (!claimed && slots.kind !== 'none' && caps && (await parkAtCapacity(q, taskId, { cap: 'workerSlots', limit: slots.limit, why: slots.kind === 'cap' ? 'full' : 'contended' }, caps.retryMs))) {
    const row = await loadTask(q, taskId);
    if (row && q instanceof UnitOfWork) await refreshCaseState(q, row.case_id, { cause: 'capacity_parked', taskId });
    return { claimed: false, reason: 'capacity', ...(row ? { state: row.state } : {}) };
  }
  if (claimed) return claimedFrom(q, owner, claimed);
  const row = await loadTask(q, taskId);
  if (!row) return { claimed: false, reason: 'not_found' };
  if (row.state !== 'open' && row.state !== 'running') return { claimed: false, reason: 'not_claimable', state: row.state };
  if (row.cancel_requested === 'hard') return { claimed: false, reason: 'cancelling', state: row.state };
  return { claimed: false, reason: 'leased', state: row.state };
}

function claimedFrom(q: Queryable, owner: string, claimed: TaskRow & ClaimedExtras): TaskClaim {
  const { claimed_case_type: caseType, claimed_untouched: untouched, ...task } = claimed;
  // A claim in a unit of work commits with it, and so does the case state it changes
  // (re-derived at COMMIT, with the other claims of the same unit of work).
  const headAtCommit = q instanceof UnitOfWork ? refreshCaseStateAtCommit(q, task.case_id, { cause: 'task_claimed', taskId: task.id }) : null;
  return { claimed: true, token: { taskId: task.id, owner, epoch: task.fence_epoch }, task, caseType, untouched, headAtCommit };
}

/** Claims made ahead in a unit of work, by task id, until claimTask takes them. */
const claimedAhead = new WeakMap<UnitOfWork, Map<string, { owner: string; row: TaskRow & ClaimedExtras }>>();

/**
 * Claims, in ONE statement, the tasks of `taskIds` that are claimable, for the deliveries of a
 * batch about to be handled in `uow`: each handler's claimTask for one of them then takes its
 * claim without a statement of its own (once: a second claim of the same task in the batch
 * runs its own statement and finds the lease live). A task not claimed here is claimed by its
 * handler as usual, which also tells why it was not. Only for claims no per-case cap governs
 * (ClaimCaps.any false): a capped claim takes the case's slot lock first, one task at a time.
 * Returns how many tasks it claimed.
 */
export async function claimTasksAhead(uow: UnitOfWork, taskIds: readonly string[], owner: string, ttlMs: number): Promise<number> {
  const distinct = [...new Set(taskIds)];
  if (distinct.length === 0) return 0;
  const { rows } = await uow.query<TaskRow & ClaimedExtras>(claimManyStatement(distinct, owner, ttlMs));
  let ahead = claimedAhead.get(uow);
  if (ahead === undefined) {
    const made = (ahead = new Map());
    claimedAhead.set(uow, made);
    // A claim nobody took would hold a lease no activation runs under: the unit of work fails.
    uow.collectForCommit('claims-ahead', null, async () => {
      if (made.size > 0) throw new Error(`claimed ahead but never taken by a handler: ${[...made.keys()].join(', ')}`);
    });
  }
  for (const row of rows) ahead.set(row.id, { owner, row });
  return rows.length;
}

/**
 * Renews leases of one owner in one statement, on the database clock. Returns the new lease end
 * of every task still held; every other one is stale (claimed or swept since) and is counted.
 */
export async function renewLeases(store: Store, owner: string, leases: readonly { taskId: string; epoch: number }[], ttlMs: number): Promise<Map<string, Date>> {
  if (leases.length === 0) return new Map();
  const { rows } = await store.db.query<{ id: string; lease_until: Date }>(renewStatement(owner, leases, ttlMs));
  const held = new Map(rows.map((r) => [r.id, r.lease_until]));
  for (const l of leases) if (!held.has(l.taskId)) store.metrics.staleFence('renew_lease');
  return held;
}

/**
 * The expired-lease sweep, in ONE unit of work with whatever `onExpired` enqueues (the
 * task.runnable outbox row): running tasks whose lease ended on the database clock become open.
 * SKIP LOCKED lets every turn-worker (and the reconciler) sweep concurrently.
 */
export async function sweepLeases(store: Store, opts: { limit: number; onExpired: (uow: UnitOfWork, task: TaskRow) => Promise<void> }): Promise<TaskRow[]> {
  return store.unitOfWork(async (uow) => {
    const { rows } = await uow.query<TaskRow>(sweepExpiredLeases(opts.limit));
    for (const t of rows) await opts.onExpired(uow, t);
    return rows;
  });
}

/**
 * Wakes the task if it is parked for a reason `cause` ends (PARK_CLASSES); undefined when it is
 * not. The caller has checked that the task waits for this very event (its park detail).
 */
export async function wakeTask(uow: UnitOfWork, taskId: string, cause: WakeCause): Promise<TaskRow | undefined> {
  const woken = (await uow.query<TaskRow>(wakeStatement(taskId, cause))).rows[0];
  if (woken) await refreshCaseState(uow, woken.case_id, { cause: `task_woken:${cause}`, taskId });
  return woken;
}

/**
 * The swept wakes, with `onWoken` in the same unit of work: health-gated backoff (`backoff`)
 * and parents waiting on their children that a sub-agent's question is waiting on
 * (`child_question`).
 */
export async function wakeDue(store: Store, opts: { limit: number; onWoken: (uow: UnitOfWork, task: TaskRow, cause: WakeCause) => Promise<void> }): Promise<TaskRow[]> {
  return store.unitOfWork(async (uow) => {
    const woken: TaskRow[] = [];
    for (const [cause, sql] of [['backoff', wakeBackoffElapsed(opts.limit)], ['child_question', wakeAskedParents(opts.limit)]] as const) {
      for (const t of (await uow.query<TaskRow>(sql)).rows) {
        await refreshCaseState(uow, t.case_id, { cause: `task_woken:${cause}`, taskId: t.id });
        await opts.onWoken(uow, t, cause);
        woken.push(t);
      }
    }
    return woken;
  });
}
