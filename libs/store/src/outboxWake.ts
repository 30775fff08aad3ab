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
 * - a relay of this process on the same Db is woken directly, with the message ids the commit
 *   wrote (it claims those rows by key, outbox.ts claimOutboxByIds; its claim reads only committed
 *   rows, so a wake can never show it an uncommitted one);
 * - a process with no relay listening (a CLI command, a load generator) NOTIFYs in a statement
 *   of its own on a `synchronous_commit = off` session: it holds that lock only for a commit
 *   that waits for no flush, and wakes the relays of the other processes through LISTEN. The
 *   payload names the message ids (when they fit), so those relays claim them by key too.
 * A lost wake-up (the NOTIFY failed, the connection dropped) delays a message by at most the
 * relay's poll interval, never loses it: the row is committed and every relay polls.
 */
import type { Db } from './db.js';
import { notifyOutbox } from './sql/outbox.js';

/**
 * A relay's wake-up. `messageIds`: the rows a commit wrote (a local wake, or a NOTIFY naming
 * them); undefined: rows of unknown ids may be waiting (a NOTIFY naming none, a reconnected listener).
 */
export type OutboxWake = (messageIds?: readonly string[]) => void;

/** The relays of this process, per Db (several Store façades may share one pool). */
const localWaiters = new WeakMap<Db, Set<OutboxWake>>();

/** Registers `onWake` to run, with the message ids, after every commit on `db` in this process that enqueued messages. */
export function onOutboxCommitted(db: Db, onWake: OutboxWake): () => void {
  let waiters = localWaiters.get(db);
  if (waiters === undefined) localWaiters.set(db, (waiters = new Set()));
  const waiter: OutboxWake = (ids) => onWake(ids);
  waiters.add(waiter);
  return () => void waiters.delete(waiter);
}

/**
 * Call after a COMMIT that wrote outbox rows (never before: the wake must find them), with the
 * ids of the rows it wrote. An id of a part that wrote nothing (a stale fence) is harmless: its
 * claim finds no row.
 */
export function outboxCommitted(db: Db, messageIds: readonly string[]): void {
  const waiters = localWaiters.get(db);
  if (waiters !== undefined && waiters.size > 0) {
    for (const wake of waiters) wake(messageIds);
    return;
  }
  db.queryDeferred(notifyOutbox(messageIds)).catch(() => {});
}
