/**
 * The store façade: the unit of work, paper reads, the ledger verifier and the outbox relay's
 * statements. Services receive a Store; they never hold a pool. A task's claim, renewal, sweep
 * and wakes are the task family's (tasks.ts); its fenced transition is the unit of work's.
 */
import { sha256Hex } from '@everdict/contracts';
import type { InboxDisposition } from '@everdict/contracts';
import type { Db, Queryable } from './db.js';
import { DuplicateKey, PaperCorrupt, PaperMissing } from './errors.js';
import { InboxCarrier } from './inboxCarrier.js';
import { recordInboxBatch } from './inboxBatch.js';
import type { InboxBatchItem } from './inboxBatch.js';
import { verifyCaseLedger } from './ledgerVerify.js';
import type { LedgerVerdict } from './ledgerHash.js';
import type { StoreMetrics } from './metrics.js';
import { noopStoreMetrics } from './metrics.js';
import { onOutboxCommitted, outboxCommitted } from './outboxWake.js';
import type { OutboxWake } from './outboxWake.js';
import { INBOX_KEY, insertDeadLetter, selectInbox } from './sql/inbox.js';
import { selectLedger, selectLedgerHeads } from './sql/ledger.js';
import type { LedgerRow } from './sql/ledger.js';
import { OUTBOX_CHANNEL, claimOutbox, claimOutboxByIds, markPublished, outboxIdsOf, outboxLag, releaseOutbox } from './sql/outbox.js';
import type { OutboxRow } from './sql/outbox.js';
import { selectPaperRevision } from './sql/papers.js';
import { UnitOfWork } from './unitOfWork.js';

/** One delivery's inbox row (its first disposition is usually 'applied'). */
export interface InboxRow {
  readonly consumer: string;
  readonly messageId: string;
  readonly payloadHash: string;
  readonly type: string;
  readonly disposition: InboxDisposition;
}

/** What became of a unit of work on a delivery's inbox row (Store.unitOfWorkOnInbox). */
export type InboxOutcome<T> =
  | { readonly kind: 'new'; readonly value: T }
  | { readonly kind: 'duplicate'; readonly disposition: InboxDisposition }
  | { readonly kind: 'conflict'; readonly storedHash: string };

/** The inbox insert failed on its key: the delivery is recorded already. */
const isInboxDuplicate = (err: unknown): boolean => err instanceof DuplicateKey && err.details['constraint'] === INBOX_KEY;

/** Attempts when the recorded row vanishes between the failed insert and its read (retention). */
const INBOX_ATTEMPTS = 3;

interface StoreOptions {
  metrics?: StoreMetrics;
}

export class Store {
  readonly metrics: StoreMetrics;

  constructor(readonly db: Db, opts: StoreOptions = {}) {
    this.metrics = opts.metrics ?? noopStoreMetrics;
  }

  /** The way to open a transaction (a consumer's: unitOfWorkOnInbox). Handlers must not call the broker in here. */
  unitOfWork<T>(fn: (uow: UnitOfWork) => Promise<T>): Promise<T> {
    return this.transact(fn);
  }

  /**
   * A unit of work; a failure `recordedAlready` recognises is counted as 'duplicate', not
   * 'rollback'. With `carry`, its statements go through the inbox carrier made for the
   * transaction, which sends the row before COMMIT at the latest.
   */
  private async transact<T>(fn: (uow: UnitOfWork) => Promise<T>, recordedAlready?: (err: unknown) => boolean, carry?: (tx: Queryable) => InboxCarrier): Promise<T> {
    const started = performance.now();
    try {
      const [result, enqueued] = await this.db.transaction(async (tx) => {
        const carrier = carry?.(tx);
        const uow = new UnitOfWork(carrier ?? tx, this.metrics);
        const r = await fn(uow);
        await uow.settleBeforeCommit();
        await carrier?.flush();
        return [r, uow.enqueued] as const;
      });
      // After the COMMIT returned, never inside it (outboxWake.ts).
      if (enqueued.length > 0) outboxCommitted(this.db, enqueued);
      this.metrics.transaction('commit', (performance.now() - started) / 1000);
      return result;
    } catch (err) {
      this.metrics.transaction(recordedAlready?.(err) === true ? 'duplicate' : 'rollback', (performance.now() - started) / 1000);
      throw err;
    }
  }

  /**
   * A unit of work that records a delivery in the inbox and runs `fn`: first writer wins. The
   * row is a plain INSERT that rides with `fn`'s first statement (InboxCarrier), or goes alone
   * ahead of it. A delivery recorded already fails that statement on the inbox key, or the
   * statement fails on a key of its own first (the delivery's effects are in); either way the
   * unit of work rolls back with nothing written, and the recorded row decides: the same
   * payload hash is a duplicate with the prior disposition, another hash a conflict the caller
   * must refuse. A concurrent unit of work recording the same delivery makes the insert wait
   * for its COMMIT or ROLLBACK. `fn`'s code up to its first statement runs for a duplicate too:
   * before it, a handler may only read its delivery.
   */
  async unitOfWorkOnInbox<T>(row: InboxRow, fn: (uow: UnitOfWork) => Promise<T>): Promise<InboxOutcome<T>> {
    for (let attempt = 1; ; attempt++) {
      let carrier: InboxCarrier | undefined;
      let failure: unknown;
      try {
        const value = await this.transact(fn, isInboxDuplicate, (tx) => (carrier = new InboxCarrier(tx, row)));
        return { kind: 'new', value };
      } catch (err) {
        // Only a failure of the statement that sent the row may mean it was recorded already:
        // once the row is in, or before it was sent, the failure is the unit of work's own.
        if (!isInboxDuplicate(err) && (carrier as InboxCarrier | undefined)?.state !== 'sent') throw err;
        failure = err;
      }
      let prior: { payload_hash: string; disposition: InboxDisposition } | undefined;
      try {
        prior = (await this.db.query<{ payload_hash: string; disposition: InboxDisposition }>(selectInbox(row.consumer, row.messageId))).rows[0];
      } catch (lookup) {
        throw isInboxDuplicate(failure) ? lookup : failure;
      }
      if (prior !== undefined) return prior.payload_hash === row.payloadHash ? { kind: 'duplicate', disposition: prior.disposition } : { kind: 'conflict', storedHash: prior.payload_hash };
      if (!isInboxDuplicate(failure)) throw failure;
      if (attempt >= INBOX_ATTEMPTS) throw new Error(`inbox row of ${row.messageId} for ${row.consumer} conflicted but could not be read in ${INBOX_ATTEMPTS} attempts`);
    }
  }

  /**
   * A unit of work that first records several deliveries of `consumer` in the inbox (distinct
   * ids, all `inlinable`; disposition 'applied'), then runs `fn` with the ids that are new. The
   * insert is first a plain INSERT: a batch holding an id recorded already fails it on the inbox
   * key before anything else ran, and the unit of work runs again with the insert that skips
   * recorded ids (recordInboxBatch 'skip'); `fn` then gets only the new ones, and the caller
   * settles the others alone (unitOfWorkOnInbox tells a duplicate from a conflict).
   */
  async unitOfWorkOnInboxBatch<T>(consumer: string, items: readonly InboxBatchItem[], fn: (uow: UnitOfWork, fresh: ReadonlySet<string>) => Promise<T>): Promise<T> {
    try {
      return await this.transact(async (uow) => fn(uow, await recordInboxBatch(uow, consumer, items, 'strict')), isInboxDuplicate);
    } catch (err) {
      if (!isInboxDuplicate(err)) throw err;
    }
    return this.unitOfWork(async (uow) => fn(uow, await recordInboxBatch(uow, consumer, items, 'skip')));
  }

  /** Reads a paper revision and verifies its bytes against the stored content hash. */
  async readPaper(paperId: string, revision?: number): Promise<{ bytes: Buffer; schemaId: string; contentHash: string; revision: number }> {
    const { rows } = await this.db.query<{ bytes: Buffer | null; schema_id: string; content_hash: string; revision: number }>(selectPaperRevision(paperId, revision));
    const r = rows[0];
    if (!r || !r.bytes) throw new PaperMissing(paperId);
    const actual = `sha256:${sha256Hex(r.bytes)}`;
    if (actual !== r.content_hash) throw new PaperCorrupt(paperId, r.content_hash, actual);
    return { bytes: r.bytes, schemaId: r.schema_id, contentHash: r.content_hash, revision: r.revision };
  }

  async readLedger(caseId: string, afterSeq = 0, limit = 1000): Promise<LedgerRow[]> {
    return (await this.db.query<LedgerRow>(selectLedger(caseId, afterSeq, limit))).rows;
  }

  /** The last sequence of each named case's ledger (0: no record yet; absent: no such case). */
  async ledgerHeads(caseIds: readonly string[]): Promise<Map<string, number>> {
    if (caseIds.length === 0) return new Map();
    const { rows } = await this.db.query<{ case_id: string; seq: string | number }>(selectLedgerHeads(caseIds));
    return new Map(rows.map((r) => [r.case_id, Number(r.seq)]));
  }

  /**
   * Recomputes the whole chain of a case (any edited, removed or reordered row fails it) and its
   * head, read in one snapshot (ledgerVerify.ts): appends racing the check never look like a broken head.
   */
  async verifyLedger(caseId: string): Promise<LedgerVerdict> {
    const { ok, records, problem } = await verifyCaseLedger(this.db, caseId);
    return problem === undefined ? { ok, records } : { ok, records, problem };
  }

  async recordDeadLetter(d: { consumer: string; messageId?: string | null; type?: string | null; reason: string; detail: string; payloadHash?: string | null }): Promise<void> {
    await this.db.query(insertDeadLetter(d));
  }

  // --- outbox relay ---------------------------------------------------------------------

  // The relay's claims, marks and releases commit without waiting for the WAL flush
  // (Db.queryDeferred): each is visible to every other relay the moment it commits, which is
  // all the exclusion between relays needs, and one a Postgres crash loses only makes a row
  // publishable again — a message published twice, which delivery is built for (at least once,
  // the consumers' inbox drops the duplicate), exactly as after a relay that died between the
  // broker's confirm and its mark. They are over a quarter of a turn-worker's commits under
  // load; as synchronous commits each would wait for a flush and queue the turns' behind it.

  /** With `producers`, only rows whose envelope's sender.service is one of them (what this relay may publish as). */
  claimOutbox(relay: string, limit: number, leaseMs: number, producers?: readonly string[]): Promise<OutboxRow[]> {
    return this.db.queryDeferred<OutboxRow>(claimOutbox(relay, limit, leaseMs, producers)).then((r) => r.rows);
  }

  /** The claimable rows among `messageIds` (rows a wake-up named), by key; `producers` as claimOutbox. */
  claimOutboxByIds(relay: string, messageIds: readonly string[], leaseMs: number, producers?: readonly string[]): Promise<OutboxRow[]> {
    return this.db.queryDeferred<OutboxRow>(claimOutboxByIds(relay, messageIds, leaseMs, producers)).then((r) => r.rows);
  }

  async markPublished(seqs: readonly number[]): Promise<void> {
    if (seqs.length) await this.db.queryDeferred(markPublished(seqs));
  }

  async releaseOutbox(seqs: readonly number[]): Promise<void> {
    if (seqs.length) await this.db.queryDeferred(releaseOutbox(seqs));
  }

  async outboxLag(): Promise<{ pending: number; lagSeconds: number }> {
    const { rows } = await this.db.query<{ pending: number; lag_seconds: number }>(outboxLag());
    return { pending: rows[0]?.pending ?? 0, lagSeconds: rows[0]?.lag_seconds ?? 0 };
  }

  /**
   * Wakes `onWake` after any committed unit of work or journal statement that enqueued a
   * message: one of this process directly, with the ids it wrote; another process's by LISTEN,
   * with the ids its NOTIFY named, if any (outboxWake.ts).
   */
  async listenOutbox(onWake: OutboxWake): Promise<() => Promise<void>> {
    const unlisten = await this.db.listen(OUTBOX_CHANNEL, (payload) => onWake(outboxIdsOf(payload)));
    const local = onOutboxCommitted(this.db, onWake);
    return async () => {
      local();
      await unlisten();
    };
  }

  /** Wakes the relays after a commit made outside a unit of work wrote the outbox rows `messageIds` (outboxWake.ts). */
  outboxCommitted(messageIds: readonly string[]): void {
    outboxCommitted(this.db, messageIds);
  }
}
