/**
 * The unit of work: the ONE transaction a handler gets. It carries the state change, the inbox
 * row, the outbox rows and the ledger appends together, so they commit or vanish as one.
 * Nothing publishes to the broker from in here — the relay does, after COMMIT.
 */
import { newId, sha256Hex } from '@everdict/contracts';
import type { InboxDisposition } from '@everdict/contracts';
import type { Queryable, QueryResult, Sql } from './db.js';
import { DuplicateKey, StaleFence } from './errors.js';
import { chainNext } from './ledgerHash.js';
import type { LedgerHead } from './ledgerHash.js';
import type { StoreMetrics } from './metrics.js';
import { insertCase, selectCaseByOrigin } from './sql/cases.js';
import { lockHeldFence } from './sql/journal.js';
import { insertInbox, selectInbox, updateInboxDisposition } from './sql/inbox.js';
import { insertLedger, insertLedgerGenesis, lockLedgerHead, selectLedgerRecord, upsertLedgerHead } from './sql/ledger.js';
import type { LedgerRow } from './sql/ledger.js';
import { insertOutbox, notifyOutbox } from './sql/outbox.js';
import { insertPaperRevision, upsertPaper } from './sql/papers.js';
import { insertTask, lockFence, transitionTask } from './sql/tasks.js';
import type { TaskTransition } from './sql/tasks.js';

/** What a worker holds after a successful claim; every fenced write names it. */
export interface FenceToken {
  readonly taskId: string;
  readonly owner: string;
  readonly epoch: number;
}

type InboxCheck =
  | { kind: 'new' }
  | { kind: 'duplicate'; disposition: InboxDisposition }
  | { kind: 'conflict'; storedHash: string };

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

export class UnitOfWork {
  private readonly fences = new Set<string>();
  private notified = false;

  constructor(private readonly tx: Queryable, private readonly metrics: StoreMetrics) {}

  /** Raw statement inside this transaction, for handler-specific SQL. */
  query<R = Record<string, unknown>>(q: Sql): Promise<QueryResult<R>> {
    return this.tx.query<R>(q);
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
   * Queues a message for the relay. With a fence, a stale worker cannot enqueue. The NOTIFY is
   * delivered by Postgres only at COMMIT, so the relay never sees an uncommitted row.
   */
  async enqueue(msg: OutgoingMessage, body: Uint8Array, opts: { routingKey?: string; fence?: FenceToken } = {}): Promise<void> {
    if (opts.fence) await this.requireFence(opts.fence, 'enqueue');
    await this.tx.query(insertOutbox({ messageId: msg.id, type: msg.type, routingKey: opts.routingKey ?? msg.type, caseId: msg.caseId, body, traceparent: msg.traceparent ?? null }));
    if (!this.notified) {
      await this.tx.query(notifyOutbox());
      this.notified = true;
    }
  }

  /**
   * Records a delivery for `consumer`. First writer wins; a redelivery with the same hash gets
   * the prior disposition, a different hash is a conflict the caller must refuse.
   */
  async checkInbox(consumer: string, messageId: string, payloadHash: string, type: string, disposition: InboxDisposition = 'applied'): Promise<InboxCheck> {
    const ins = await this.tx.query(insertInbox(consumer, messageId, payloadHash, type, disposition));
    if (ins.rowCount === 1) return { kind: 'new' };
    const { rows } = await this.tx.query<{ payload_hash: string; disposition: InboxDisposition }>(selectInbox(consumer, messageId));
    const prior = rows[0];
    if (!prior) return { kind: 'new' }; // unreachable: the conflict row is committed and visible
    if (prior.payload_hash !== payloadHash) return { kind: 'conflict', storedHash: prior.payload_hash };
    return { kind: 'duplicate', disposition: prior.disposition };
  }

  async setInboxDisposition(consumer: string, messageId: string, disposition: InboxDisposition): Promise<void> {
    await this.tx.query(updateInboxDisposition(consumer, messageId, disposition));
  }

  /**
   * Appends to the case's hash chain. The head row is locked until COMMIT, so appends to one
   * case serialise instead of thrashing. Should an append still collide (a head written by a
   * path that did not lock it), we roll back to the savepoint, re-read the head and retry with
   * the SAME record id. A record id already in the chain is returned as-is, never appended twice.
   */
  async appendLedger(caseId: string, rec: LedgerAppend): Promise<LedgerAppended> {
    const recordId = rec.recordId ?? newId();
    for (let attempt = 0; attempt < MAX_LEDGER_RETRIES; attempt++) {
      const existing = await this.tx.query<LedgerRow>(selectLedgerRecord(recordId));
      if (existing.rows[0]) return { recordId, seq: existing.rows[0].seq, hash: existing.rows[0].hash };
      const head = (await this.tx.query<LedgerHead>(lockLedgerHead(caseId))).rows[0];
      const r = chainNext(caseId, head, { recordId, kind: rec.kind, body: rec.body }, new Date().toISOString());
      await this.tx.query({ text: 'SAVEPOINT ev_ledger_append' });
      try {
        await this.tx.query(insertLedger({ caseId, ...r }));
        await this.tx.query(upsertLedgerHead(caseId, r.seq, r.hash));
        await this.tx.query({ text: 'RELEASE SAVEPOINT ev_ledger_append' });
        return { recordId, seq: r.seq, hash: r.hash };
      } catch (err) {
        await this.tx.query({ text: 'ROLLBACK TO SAVEPOINT ev_ledger_append' });
        if (!(err instanceof DuplicateKey)) throw err;
      }
    }
    throw new Error(`ledger append for case ${caseId} did not settle after ${MAX_LEDGER_RETRIES} attempts`);
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
