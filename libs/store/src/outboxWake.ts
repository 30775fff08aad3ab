/**
 * Waking the outbox relay once a transaction that enqueued messages has committed.
 *
 * No writing transaction NOTIFYs. Postgres serialises every committing transaction that
 * NOTIFYs on one cluster-wide lock, held from before its commit record until the commit has
 * returned — across the WAL flush. At half load every task's finish and every arrival enqueues a
 * message, so the turns' group-commit statements queued behind each other's flushes on that
 * lock (pg_stat_activity: Lock:object was a fifth of the active backends' samples).
 *
 * Instead, after the COMMIT returned:
 * - a relay of this process on the same Db is woken directly (it publishes what this process
 *   wrote; its claim reads only committed rows, so a wake can never show it an uncommitted one);
 * - a process with no relay listening (a CLI command, a load generator) NOTIFYs in a statement
 *   of its own on a `synchronous_commit = off` session: it holds that lock only for a commit
 *   that waits for no flush, and wakes the relays of the other processes through LISTEN.
 * A lost wake-up (the NOTIFY failed, the connection dropped) delays a message by at most the
 * relay's poll interval, never loses it: the row is committed and every relay polls.
 */
import type { Db } from './db.js';
import { notifyOutbox } from './sql/outbox.js';

/** The relays of this process, per Db (several Store façades may share one pool). */
const localWaiters = new WeakMap<Db, Set<() => void>>();

/** Registers `onWake` to run after every commit on `db` in this process that enqueued messages. */
export function onOutboxCommitted(db: Db, onWake: () => void): () => void {
  let waiters = localWaiters.get(db);
  if (waiters === undefined) localWaiters.set(db, (waiters = new Set()));
  const waiter = () => onWake();
  waiters.add(waiter);
  return () => void waiters.delete(waiter);
}

/** Call after a COMMIT that wrote outbox rows (never before: the wake must find them). */
export function outboxCommitted(db: Db): void {
  const waiters = localWaiters.get(db);
  if (waiters !== undefined && waiters.size > 0) {
    for (const wake of waiters) wake();
    return;
  }
  db.queryDeferred(notifyOutbox()).catch(() => {});
}
