/**
 * The unit of work: the ONE transaction a handler gets. It carries the state change, the inbox
 * row, the outbox rows and the ledger appends together, so they commit or vanish as one.
 * Nothing publishes to the broker from in here — the relay does, after COMMIT.
 */
import { newId, sha256Hex } from '@everdict/contracts';
import type { InboxDisposition } from '@everdict/contracts';
import type { Queryable, QueryResult, Sql } from './db.js';
import { StaleFence } from './errors.js';
import { chainNext } from './ledgerHash.js';
import type { LedgerHead } from './ledgerHash.js';
import type { StoreMetrics } from './metrics.js';
import { insertCase, selectCaseByOrigin } from './sql/cases.js';
import { lockHeldFence } from './sql/journal.js';
import { updateInboxDisposition } from './sql/inbox.js';
import { appendLedgerRecord, appendLedgerRecords, insertLedgerGenesis, lockLedgerHeadForAppend } from './sql/ledger.js';
import type { LedgerAppendResult, LedgerHeadForAppend } from './sql/ledger.js';
import { insertOutbox } from './sql/outbox.js';
import { insertPaperRevision, upsertPaper } from './sql/papers.js';
import { insertTask, lockFence, transitionTask } from './sql/tasks.js';
import type { TaskTransition } from './sql/tasks.js';

/** What a worker holds after a successful claim; every fenced write names it. */
export interface FenceToken {
  readonly taskId: string;
  readonly owner: string;
  readonly epoch: number;
}

/** The envelope fields the outbox needs; the body is the exact bytes to publish. */
interface OutgoingMessage {
  readonly id: string;
  readonly type: string;
  readonly caseId: string | null;
  /** The envelope's traceparent, stored in the row's own column for the relay. */
  readonly traceparent?: string | undefined;
}

/** What the holder of a fence reads under its lock (UnitOfWork.holdFence). */
interface FenceHeld {
  readonly rowVersion: number;
  readonly cancelRequested: 'hard' | 'soft' | null;
}

export interface LedgerAppend {
  readonly recordId?: string;
  readonly kind: string;
  readonly body: unknown;
}

export interface LedgerAppended {
  readonly recordId: string;
  readonly seq: number;
  readonly hash: string;
}

const MAX_LEDGER_RETRIES = 20;

/** The items queued under one key for COMMIT, and the flush that writes them. */
interface AtCommit {
  readonly items: unknown[];
  readonly flush: (items: unknown[]) => Promise<void>;
  readonly last: boolean;
}

export class UnitOfWork {
  private readonly fences = new Set<string>();
  /** The message ids of the outbox rows this unit of work wrote (the relays are woken with them after COMMIT). */
  private readonly outboxIds: string[] = [];
  /** Items collected for one statement at COMMIT, by key, in registration order (collectForCommit). */
  private readonly atCommit = new Map<string, AtCommit>();

  constructor(private readonly tx: Queryable, private readonly metrics: StoreMetrics) {}

  /**
   * Queues `item` under `key`; after the unit of work's callback returned, and before COMMIT,
   * `flush` runs once with every item queued under that key (so N handlers of a batch share
   * ONE statement instead of N). The flush is part of the transaction: if it throws, nothing of
   * the unit of work commits. Only work whose result nobody in the callback reads may be queued.
   * `last`: the flush runs after every other one (a derivation that must see all the unit of
   * work wrote), and may end the unit of work by sending its last statements with the COMMIT
   * (commitWith, which first runs whatever is still queued).
   */
  collectForCommit<T>(key: string, item: T, flush: (items: T[]) => Promise<void>, opts: { last?: boolean } = {}): void {
    const slot = this.atCommit.get(key);
    if (slot) slot.items.push(item);
    else this.atCommit.set(key, { items: [item], flush: flush as (items: unknown[]) => Promise<void>, last: opts.last === true });
  }

  /** Runs the queued flushes (Store.unitOfWork calls it before COMMIT), `last` ones last; a flush may queue more. */
  async settleBeforeCommit(): Promise<void> {
    for (;;) {
      let next: [string, AtCommit] | undefined;
      for (const entry of this.atCommit) {
        if (!entry[1].last) {
          next = entry;
          break;
        }
        next ??= entry;
      }
      if (next === undefined) return;
      this.atCommit.delete(next[0]);
      await next[1].flush(next[1].items);
    }
  }

  /** Outbox rows were written by this unit of work: the store wakes the relays with their ids after its COMMIT. */
  outboxWritten(messageIds: readonly string[]): void {
    for (const id of messageIds) this.outboxIds.push(id);
  }

  /** The ids of the outbox rows the relays are to be woken for once this unit of work committed (Store.unitOfWork). */
  get enqueued(): readonly string[] {
    return this.outboxIds;
  }

  /** Raw statement inside this transaction, for handler-specific SQL. */
  query<R = Record<string, unknown>>(q: Sql): Promise<QueryResult<R>> {
    return this.tx.query<R>(q);
  }

  /**
   * The unit of work's last statements, sent with its COMMIT where the port can
   * (Queryable.commitWith); the work queued for COMMIT runs first. Nothing may run after it.
   */
  async commitWith(qs: readonly Sql[]): Promise<QueryResult<unknown>[]> {
    await this.settleBeforeCommit();
    if (this.tx.commitWith) return this.tx.commitWith(qs);
    return this.queryMany(qs);
  }

  /** Statements in order, in one round trip where the port can (Queryable.queryMany). */
  async queryMany(qs: readonly Sql[]): Promise<QueryResult<unknown>[]> {
    if (this.tx.queryMany) return this.tx.queryMany(qs);
    const out: QueryResult<unknown>[] = [];
    for (const q of qs) out.push(await this.tx.query(q));
    return out;
  }

  /**
   * Asserts the fence and locks the task row until COMMIT, so no claim can slip in between the
   * check and the writes that follow. Throws StaleFence (and counts it) if the epoch moved on.
   */
  async requireFence(token: FenceToken, operation: string): Promise<void> {
    const key = `${token.taskId}:${token.epoch}:${token.owner}`;
    if (this.fences.has(key)) return;
    const { rowCount } = await this.tx.query(lockFence(token.taskId, token.owner, token.epoch));
    if (rowCount === 0) {
      this.metrics.staleFence(operation);
      throw new StaleFence(token.taskId, token.epoch, operation);
    }
    this.fences.add(key);
  }

  /**
   * requireFence, returning what a holder decides on under the lock: the task's row version and
   * a pending cancel request (neither can change before COMMIT while the row is locked).
   */
  async holdFence(token: FenceToken, operation: string): Promise<FenceHeld> {
    const { rows } = await this.tx.query<{ row_version: number; cancel_requested: 'hard' | 'soft' | null }>(lockHeldFence(token.taskId, token.owner, token.epoch));
    const held = rows[0];
    if (!held) {
      this.metrics.staleFence(operation);
      throw new StaleFence(token.taskId, token.epoch, operation);
    }
    this.fences.add(`${token.taskId}:${token.epoch}:${token.owner}`);
    return { rowVersion: held.row_version, cancelRequested: held.cancel_requested };
  }

  /** Fenced transition that also releases the lease (done, failed, parked, open, cancelled). */
  async transitionTask(token: FenceToken, to: TaskTransition): Promise<number> {
    const op = to.state === 'parked' ? 'park_task' : to.state === 'open' ? 'release_task' : 'complete_task';
    await this.requireFence(token, op);
    const { rows, rowCount } = await this.tx.query<{ row_version: number }>(transitionTask(token.taskId, token.owner, token.epoch, to));
    if (rowCount === 0) {
      this.metrics.staleFence(op);
      throw new StaleFence(token.taskId, token.epoch, op);
    }
    return rows[0]!.row_version;
  }

  /** Fenced checkpoint: the state paper must already be written in this unit of work. */
  async writeCheckpoint(token: FenceToken, c: { turn: number; statePaperId: string; stateHash: string; contextHash?: string | null }): Promise<void> {
    await this.requireFence(token, 'write_checkpoint');
    await this.tx.query({
      name: 'ev_insert_checkpoint',
      text: `INSERT INTO turn_checkpoints (task_id, turn, state_paper_id, state_hash, context_hash, fence_epoch)
             VALUES ($1::uuid, $2::int, $3::uuid, $4::text, $5::text, $6::bigint)`,
      values: [token.taskId, c.turn, c.statePaperId, c.stateHash, c.contextHash ?? null, token.epoch],
    });
  }

  /**
   * Queues a message for the relay. With a fence, a stale worker cannot enqueue. The relays are
   * woken after COMMIT, never inside the transaction (outboxWake.ts).
   */
  async enqueue(msg: OutgoingMessage, body: Uint8Array, opts: { routingKey?: string; fence?: FenceToken } = {}): Promise<void> {
    if (opts.fence) await this.requireFence(opts.fence, 'enqueue');
    await this.tx.query(insertOutbox({ messageId: msg.id, type: msg.type, routingKey: opts.routingKey ?? msg.type, caseId: msg.caseId, body, traceparent: msg.traceparent ?? null }));
    this.outboxWritten([msg.id]);
  }

  async setInboxDisposition(consumer: string, messageId: string, disposition: InboxDisposition): Promise<void> {
    await this.tx.query(updateInboxDisposition(consumer, messageId, disposition));
  }

  /**
   * Appends to the case's hash chain: the head is locked until COMMIT (so appends to one case
   * serialise instead of thrashing), then the record and the head move in one statement — two
   * round trips, one when the caller already holds the head lock and passes the head it read
   * under it (`lockedHead`, e.g. the case-state lock). A record id already in the chain is
   * returned as-is, never appended twice. Should the insert still collide (a head written by a
   * path that did not lock it), it wrote nothing, and the head is re-read and the SAME record id
   * chained after it.
   */
  async appendLedger(caseId: string, rec: LedgerAppend, opts: { lockedHead?: LedgerHead } = {}): Promise<LedgerAppended> {
    const recordId = rec.recordId ?? newId();
    // A caller-chosen id may be chained already: only a fresh id may skip the look-up.
    let head: LedgerHead | null | undefined = rec.recordId === undefined ? opts.lockedHead : undefined;
    for (let attempt = 0; attempt < MAX_LEDGER_RETRIES; attempt++) {
      if (head === undefined) {
        const found = (await this.tx.query<LedgerHeadForAppend>(lockLedgerHeadForAppend(caseId, recordId))).rows[0]!;
        if (found.record_seq !== null) return { recordId, seq: found.record_seq, hash: found.record_hash! };
        head = found.seq === null ? null : { seq: found.seq, hash: found.hash! };
      }
      const r = chainNext(caseId, head, { recordId, kind: rec.kind, body: rec.body }, new Date().toISOString());
      const done = (await this.tx.query<LedgerAppendResult>(appendLedgerRecord({ caseId, ...r }))).rows[0]!;
      if (done.inserted === 1 && done.moved === 1) return { recordId, seq: r.seq, hash: r.hash };
      if (done.inserted === 1) throw new Error(`ledger head of case ${caseId} is ahead of its chain at seq ${r.seq}`);
      head = undefined;
    }
    throw new Error(`ledger append for case ${caseId} did not settle after ${MAX_LEDGER_RETRIES} attempts`);
  }

  /**
   * appendLedger for fresh records of DISTINCT cases whose heads this unit of work holds locked
   * (`lockedHead`, read under the lock): one statement for all of them. A record the statement
   * skipped (a conflict) is appended on its own, re-reading its head.
   * `commit`: the statement is the unit of work's last and goes with its COMMIT (commitWith);
   * a conflict then fails it, and with it the unit of work, instead of being appended again.
   */
  async appendLedgerLocked(items: readonly { caseId: string; rec: Omit<LedgerAppend, 'recordId'>; lockedHead: LedgerHead }[], opts: { commit?: boolean } = {}): Promise<LedgerAppended[]> {
    if (new Set(items.map((i) => i.caseId)).size !== items.length) throw new Error('appendLedgerLocked: one record per case');
    const createdAt = new Date().toISOString();
    const chained = items.map((i) => chainNext(i.caseId, i.lockedHead, { recordId: newId(), kind: i.rec.kind, body: i.rec.body }, createdAt));
    if (items.length === 0) return [];
    const records = items.map((i, n) => ({ caseId: i.caseId, ...chained[n]! }));
    if (opts.commit === true) {
      assertStrictAppend(chained, (await this.commitWith([appendLedgerRecords(records, 'strict')]))[0]!);
      return chained.map((r) => ({ recordId: r.recordId, seq: r.seq, hash: r.hash }));
    }
    const rows = (await this.tx.query<{ record_id: string; moved: boolean }>(appendLedgerRecords(records))).rows;
    const landed = new Map(rows.map((r) => [r.record_id, r.moved]));
    const out: LedgerAppended[] = [];
    for (const [n, r] of chained.entries()) {
      const moved = landed.get(r.recordId);
      if (moved === false) throw new Error(`ledger head of case ${items[n]!.caseId} is ahead of its chain at seq ${r.seq}`);
      out.push(moved ? { recordId: r.recordId, seq: r.seq, hash: r.hash } : await this.appendLedger(items[n]!.caseId, { recordId: r.recordId, kind: r.kind, body: r.body }));
    }
    return out;
  }

  /** Stores bytes as the next revision of a named paper; returns its id, revision and hash. */
  async putPaper(p: { caseId: string; kind: string; name: string; schemaId: string; bytes: Uint8Array }): Promise<{ paperId: string; revision: number; contentHash: string }> {
    const contentHash = `sha256:${sha256Hex(p.bytes)}`;
    const { rows } = await this.tx.query<{ id: string; head_revision: number }>(upsertPaper({ id: newId(), caseId: p.caseId, kind: p.kind, name: p.name }));
    const { id, head_revision: revision } = rows[0]!;
    await this.tx.query(insertPaperRevision({ paperId: id, revision, schemaId: p.schemaId, contentHash, bytes: p.bytes }));
    return { paperId: id, revision, contentHash };
  }

  /** Opens a case idempotently on its origin key; `created` is false for a duplicate arrival. */
  async openCase(c: { id?: string; caseType: string; originKey: string; customer: string; title?: string; objective?: unknown; scope?: unknown }): Promise<{ caseId: string; created: boolean }> {
    const id = c.id ?? newId();
    const ins = await this.tx.query<{ id: string }>(insertCase({ ...c, id }));
    if (ins.rows[0]) {
      await this.tx.query(insertLedgerGenesis(id));
      return { caseId: ins.rows[0].id, created: true };
    }
    const { rows } = await this.tx.query<{ id: string }>(selectCaseByOrigin(c.originKey));
    return { caseId: rows[0]!.id, created: false };
  }

  async createTask(t: { id?: string; caseId: string; parentId?: string | null; profile: string; profileVersion?: string; objective?: unknown; budgetLimitMinutes?: number | null }): Promise<string> {
    const id = t.id ?? newId();
    await this.tx.query(insertTask({ ...t, id, parentId: t.parentId ?? null }));
    return id;
  }
}

/**
 * The answer of a strict appendLedgerRecords sent with its COMMIT: the insert failed on any
 * conflict, so a record in whose head did not move is a broken chain — refused loudly.
 */
export function assertStrictAppend(chained: readonly { recordId: string; seq: number }[], result: QueryResult<unknown>): void {
  const moved = new Map((result.rows as { record_id: string; moved: boolean }[]).map((r) => [r.record_id, r.moved]));
  const stuck = chained.find((r) => moved.get(r.recordId) !== true);
  if (stuck !== undefined) throw new Error(`ledger head is ahead of its chain at seq ${stuck.seq} (record ${stuck.recordId})`);
}
