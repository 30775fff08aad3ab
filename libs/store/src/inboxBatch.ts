/**
 * The inbox of SEVERAL deliveries in one unit of work (the consumer's batched mode): one
 * statement records every delivery of the batch, and one statement sets the disposition of the
 * ones their handlers ignored. Each delivery's handler runs in the same transaction, so inbox
 * rows, state changes and outbox rows of the whole batch commit together or not at all.
 *
 * Like the single insert, the batch's is first a plain INSERT (Store.unitOfWorkOnInboxBatch): a
 * batch holding an id recorded already fails it on the inbox key before anything else ran, and
 * the unit of work runs again with the insert that skips recorded rows (ON CONFLICT DO NOTHING)
 * — one redelivery costs its batch one round trip, never the rest of the batch their unit of
 * work, and the common batch (no redelivery) pays no speculative insertion.
 *
 * The insert carries inline literals — every value has a closed, validated shape (uuid, sha256
 * digest, our own service and type names), exactly as `insertInbox` renders a single one — so
 * the store sends it in the same round trip as BEGIN, on Postgres as EXECUTE of a statement the
 * session prepared once. A delivery whose values do not all have
 * those shapes is not batched (`inlinable` says so); nothing free-form is ever inlined.
 */
import type { InboxDisposition } from '@everdict/contracts';
import { inlinableInboxRow, insertInboxBatch } from './sql/inbox.js';
import type { InboxBatchMode } from './sql/inbox.js';
import type { UnitOfWork } from './unitOfWork.js';

export interface InboxBatchItem {
  readonly messageId: string;
  readonly payloadHash: string;
  readonly type: string;
}

/** Whether a delivery's inbox row can be written by `recordInboxBatch` (closed-shape values only). */
export function inlinable(consumer: string, item: InboxBatchItem): boolean {
  return inlinableInboxRow(consumer, item.messageId, item.payloadHash, item.type);
}

/**
 * Inserts the inbox rows of `items` (distinct message ids, all `inlinable`) with disposition
 * 'applied'; returns the ids that are NEW. `strict` (the default is `skip`): any id recorded
 * already fails the statement on the inbox key (DuplicateKey), so every id returned is new. With
 * `skip` an id already recorded (a redelivery, or a different payload under a known id) is not
 * inserted: the caller settles it alone, after this unit of work, through
 * `Store.unitOfWorkOnInbox`, which tells a duplicate from a conflict. A concurrent unit of work
 * recording the same id makes this statement wait for it, as the single insert does.
 */
export async function recordInboxBatch(uow: UnitOfWork, consumer: string, items: readonly InboxBatchItem[], mode: InboxBatchMode = 'skip'): Promise<Set<string>> {
  if (items.length === 0) return new Set();
  // Rows go in message-id order: two batches holding some of the same ids then wait for each
  // other in one order and never deadlock (a redelivery can land in a batch beside the first).
  const sorted = [...items].sort((a, b) => (a.messageId < b.messageId ? -1 : a.messageId > b.messageId ? 1 : 0));
  const { rows: fresh } = await uow.query<{ message_id: string }>(insertInboxBatch(consumer, sorted, mode));
  return mode === 'strict' ? new Set(sorted.map((it) => it.messageId)) : new Set(fresh.map((r) => r.message_id));
}

/** Sets the disposition of several inbox rows of `consumer` (e.g. the ones handlers ignored). */
export async function setInboxDispositions(uow: UnitOfWork, consumer: string, messageIds: readonly string[], disposition: InboxDisposition): Promise<void> {
  if (messageIds.length === 0) return;
  await uow.query({
    name: 'ev_set_inbox_dispositions',
    text: 'UPDATE inbox_messages SET disposition = $3::inbox_disposition WHERE consumer = $1::text AND message_id = ANY($2::uuid[])',
    values: [consumer, messageIds, disposition],
  });
}
