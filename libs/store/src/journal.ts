/**
 * The durable call journal and checkpoints (seed 004 §2.1–§2.2), as functions over a unit of
 * work, the store, or any Queryable (reads).
 *
 * Fencing: every write names the writer's epoch. The hot write (`writeJournals`, used by
 * `writeTurn`, `writeTurnAlone` and the group committer) carries it in its own WHERE clause —
 * the predicate of `UnitOfWork.requireFence` (task row locked iff still held by that owner at
 * that epoch), with each task's part written only if its fence held — so it can run as one
 * statement without an explicit transaction; a refused part throws StaleFence and is counted
 * like any other. The other writes here call `uow.requireFence` first.
 *
 * Invariants:
 * - a request or response is stored as paper bytes whose content hash is recorded next to the
 *   call; reading a call back re-verifies the bytes, so a tampered or truncated paper surfaces
 *   as `PaperCorrupt` / `PaperMissing`, never as a plausible answer;
 * - (task, turn, ordinal) is unique and the first intent wins; a settled call is never
 *   overwritten (except a failed model call, which produced no response);
 * - a checkpoint names the state paper and the hash that verifies its bytes;
 * - a ledger record extends its case's chain by the one chain rule (`chainNext`, which
 *   `UnitOfWork.appendLedger` uses too), by compare-and-set on the head it was chained to.
 */
import { newId, sha256Hex } from '@everdict/contracts';
import type { Queryable } from './db.js';
import { PaperCorrupt, PaperMissing, StaleFence } from './errors.js';
import type { Store } from './store.js';
import type { NoteRow } from './sql/taskGraph.js';
import { selectRestorePoint } from './sql/checkpoints.js';
import type { RestoreRow } from './sql/checkpoints.js';
import { chainNext } from './ledgerHash.js';
import type { LedgerHead } from './ledgerHash.js';
import { lockLedgerHead } from './sql/ledger.js';
import { insertPapers, selectTurnCalls, supersedeModelIntent, writeJournals } from './sql/journal.js';
import type { CallCompletion, CheckpointWrite, JournalRow, JournalWriteItem, JournalWriteResult, NewCallIntent, NewPaper, OutboxWrite, TransitionWrite } from './sql/journal.js';
import type { FenceToken, LedgerAppend, LedgerAppended, UnitOfWork } from './unitOfWork.js';

export type { CallCompletion, CheckpointWrite, NewCallIntent, NewPaper, OutboxWrite, TransitionWrite } from './sql/journal.js';

/** `sha256:` of exact bytes: the content hash papers carry. */
export function contentHash(bytes: Uint8Array): string {
  return `sha256:${sha256Hex(bytes)}`;
}

/** A new paper (first revision) with a fresh id and the hash of its bytes. */
export function newPaper(p: { kind: string; name: string; schemaId: string; bytes: Buffer }): NewPaper {
  return { id: newId(), kind: p.kind, name: p.name, schemaId: p.schemaId, contentHash: contentHash(p.bytes), bytes: p.bytes };
}

/** A call as stored, with verified request/response bytes. */
export interface StoredCall {
  readonly id: string;
  readonly turn: number;
  readonly ordinal: number;
  readonly kind: JournalRow['kind'];
  readonly toolName: string | null;
  readonly status: string;
  readonly fenceEpoch: number;
  readonly requestHash: string | null;
  readonly responseHash: string | null;
  readonly route: string | null;
  readonly versions: unknown;
  readonly request: Buffer | null;
  readonly response: Buffer | null;
  readonly completedAt: Date | null;
}

function verified(what: string, callId: string, bytes: Buffer | null, paperHash: string | null, recorded: string | null): Buffer | null {
  if (recorded === null) return null;
  if (bytes === null) throw new PaperMissing(`${what} of call ${callId}`);
  const actual = contentHash(bytes);
  if (actual !== recorded || (paperHash !== null && paperHash !== recorded)) throw new PaperCorrupt(`${what} of call ${callId}`, recorded, actual);
  return bytes;
}

/** Every call of one turn, ordered by ordinal; throws PaperMissing/PaperCorrupt on bad bytes. */
export async function loadTurnCalls(db: Queryable, taskId: string, turn: number): Promise<StoredCall[]> {
  const { rows } = await db.query<JournalRow>(selectTurnCalls(taskId, turn));
  return rows.map((r) => ({
    id: r.id,
    turn: r.turn,
    ordinal: r.ordinal,
    kind: r.kind,
    toolName: r.tool_name,
    status: r.status,
    fenceEpoch: r.fence_epoch,
    requestHash: r.request_hash,
    responseHash: r.response_hash,
    route: r.route,
    versions: r.versions,
    request: verified('request', r.id, r.request_bytes, r.request_content_hash, r.request_hash),
    response: verified('response', r.id, r.response_bytes, r.response_content_hash, r.response_hash),
    completedAt: r.completed_at,
  }));
}

/**
 * What one fenced journal statement writes for one task: a turn's commit (outcomes, papers, the
 * next intent, checkpoint, ledger record, transition, outbox) or any part of one (C1, C2). The
 * group committer and a unit of work execute the same value the same way (`journalItem`).
 */
export interface TurnWrite {
  readonly papers: readonly NewPaper[];
  readonly completions: readonly CallCompletion[];
  readonly intents: readonly NewCallIntent[];
  readonly checkpoint: CheckpointWrite | null;
  /** The case's next ledger record; a write redone after a lost compare-and-set keeps its record id. */
  readonly ledger: LedgerAppend | null;
  /**
   * Releases the lease with the write (done, failed, cancelled, parked, open). Nothing fenced can
   * follow it in the same unit of work: the fence is gone once it applied. Default: none.
   */
  readonly transition?: TransitionWrite | null;
  /** Outbox rows enqueued under the same fence (the relay is notified at COMMIT). Default: none. */
  readonly outbox?: readonly OutboxWrite[];
}

export interface TurnWritten {
  readonly completed: number;
  readonly inserted: number;
  readonly cancelRequested: 'hard' | 'soft' | null;
  /** The task's row version under the fence lock (stamped on plan revisions). */
  readonly rowVersion: number;
  readonly ledger: LedgerAppended | null;
  /** The case's ledger head after this write (null when no record was appended). */
  readonly head: LedgerHead | null;
}

/** The write with its ledger record's id allocated, so every attempt appends the same record. */
export function withRecordId(w: TurnWrite): TurnWrite {
  return w.ledger === null || w.ledger.recordId !== undefined ? w : { ...w, ledger: { ...w.ledger, recordId: newId() } };
}

/** One task's write as the statement's item, its ledger record chained after `head` (chainNext). */
export function journalItem(token: FenceToken, caseId: string, w: TurnWrite, head: LedgerHead | null | undefined): JournalWriteItem {
  const l = w.ledger;
  return {
    taskId: token.taskId,
    caseId,
    owner: token.owner,
    epoch: token.epoch,
    papers: w.papers,
    completions: w.completions,
    intents: w.intents,
    checkpoint: w.checkpoint,
    ledger: l === null ? null : chainNext(caseId, head, { recordId: l.recordId ?? newId(), kind: l.kind, body: l.body }, new Date().toISOString()),
    transition: w.transition ?? null,
    outbox: w.outbox ?? [],
  };
}

/** What the statement's row of `item` says was written. */
export function turnWritten(r: JournalWriteResult, item: JournalWriteItem): TurnWritten {
  const chained = item.ledger;
  return {
    completed: r.completed,
    inserted: r.inserted,
    cancelRequested: r.cancel_requested,
    rowVersion: r.row_version ?? 0,
    ledger: chained === null ? null : { recordId: chained.recordId, seq: chained.seq, hash: chained.hash },
    head: chained === null ? null : { seq: chained.seq, hash: chained.hash },
  };
}

/**
 * Executes a write inside a unit of work: the case's ledger head is locked first (so the chained
 * append cannot conflict), then one fenced statement writes everything. StaleFence (counted)
 * when the fence no longer holds.
 */
export async function writeTurn(uow: UnitOfWork, token: FenceToken, caseId: string, w: TurnWrite): Promise<TurnWritten> {
  const head = w.ledger === null ? null : (await uow.query<LedgerHead>(lockLedgerHead(caseId))).rows[0];
  const item = journalItem(token, caseId, w, head);
  const r = (await uow.query<JournalWriteResult>(writeJournals([item]))).rows[0]!;
  if (item.outbox.length > 0) uow.outboxWritten(item.outbox.map((o) => o.messageId));
  if (!r.fenced) {
    await uow.requireFence(token, 'write_journal'); // throws StaleFence and counts it
    throw new StaleFence(token.taskId, token.epoch, 'write_journal');
  }
  if (!r.applied) throw new Error(`ledger head of case ${caseId} moved under its lock`);
  return turnWritten(r, item);
}

/**
 * writeTurn at COMMIT: queued with the unit of work's other such writes and written with them
 * by ONE fenced statement just before COMMIT (the first intents of a batch of claims). Only a
 * write without a ledger record, transition or outbox rows, whose result the caller does not
 * read. A stale fence fails the whole unit of work with StaleFence (counted).
 */
export function writeTurnAtCommit(uow: UnitOfWork, token: FenceToken, caseId: string, w: TurnWrite): void {
  if (w.ledger !== null || (w.transition ?? null) !== null || (w.outbox ?? []).length > 0) throw new Error('writeTurnAtCommit: a write with a ledger record, transition or outbox rows is written by writeTurn');
  uow.collectForCommit('turn_writes', { token, caseId, w }, async (parts) => {
    const rows = (await uow.query<JournalWriteResult>(writeJournals(parts.map((p) => journalItem(p.token, p.caseId, p.w, null))))).rows;
    for (const r of rows) {
      if (r.fenced) continue;
      const { token: stale } = parts[r.idx]!;
      await uow.requireFence(stale, 'write_journal'); // throws StaleFence and counts it
      throw new StaleFence(stale.taskId, stale.epoch, 'write_journal');
    }
  });
}

/**
 * The same write as ONE statement, without an explicit transaction: the statement is its own
 * unit of work, fenced by its own WHERE clause. A ledger record is chained after `head` (what
 * this worker last appended to the case) by compare-and-set; if the head moved meanwhile (or
 * is unknown) the statement writes nothing and the write is redone in a unit of work under the
 * head lock, with the same record id.
 */
export async function writeTurnAlone(store: Store, token: FenceToken, caseId: string, write: TurnWrite, head: LedgerHead | null): Promise<TurnWritten> {
  const w = withRecordId(write);
  if (w.ledger !== null && head === null) return store.unitOfWork((uow) => writeTurn(uow, token, caseId, w));
  const item = journalItem(token, caseId, w, head);
  const r = (await store.db.query<JournalWriteResult>(writeJournals([item]))).rows[0]!;
  if (!r.fenced) {
    store.metrics.staleFence('write_journal');
    throw new StaleFence(token.taskId, token.epoch, 'write_journal');
  }
  if (!r.applied) return store.unitOfWork((uow) => writeTurn(uow, token, caseId, w));
  if (item.outbox.length > 0) store.outboxCommitted(item.outbox.map((o) => o.messageId));
  return turnWritten(r, item);
}

/** Replaces the request of an unanswered model intent by the one actually sent; false if it had an answer. */
export async function supersedeIntent(uow: UnitOfWork, token: FenceToken, caseId: string, callId: string, request: NewPaper, route: string | null, versions: unknown): Promise<boolean> {
  await uow.requireFence(token, 'supersede_intent');
  // The call's first request paper keeps its name (`calls/<id>/request`); the superseding
  // request is a paper of its own beside it, so both stay readable and names stay unique.
  await uow.query(insertPapers(caseId, [{ ...request, name: `${request.name}/${request.id}` }]));
  return (await uow.query(supersedeModelIntent(callId, token.taskId, request.id, request.contentHash, route, versions))).rows.length === 1;
}

interface RestoredCheckpoint {
  readonly turn: number;
  readonly statePaperId: string;
  readonly stateHash: string;
  readonly contextHash: string | null;
  readonly versions: unknown;
  readonly fenceEpoch: number;
  /** The state document; null when it is the state the caller holds (`heldStateHash`): not read. */
  readonly bytes: Buffer | null;
}

/**
 * The restore point of a task, in one round trip: its latest checkpoint (verified, or null when
 * it has none), the journal of the turn it resumes (every paper verified), the notes that turn
 * carries, the case type and the case's ledger head. Bad bytes throw PaperMissing/PaperCorrupt.
 * `heldStateHash`: a state the caller holds in memory (one it wrote itself). When the latest
 * checkpoint records exactly that state, and its paper is stored under that hash, the document
 * is neither reassembled nor sent (`bytes` null): the caller continues from its own copy, which
 * the hash says is the same document.
 */
export async function loadRestorePoint(
  db: Queryable,
  taskId: string,
  caseId: string,
  heldStateHash: string | null = null,
): Promise<{ checkpoint: RestoredCheckpoint | null; caseType: string; head: LedgerHead | null; calls: StoredCall[]; notes: NoteRow[] }> {
  const r = (await db.query<RestoreRow>(selectRestorePoint(taskId, caseId, heldStateHash))).rows[0];
  if (!r) throw new PaperMissing(`case ${caseId}`);
  const head = r.head_seq === null || r.head_hash === null ? null : { seq: r.head_seq, hash: r.head_hash };
  const b64 = (v: string | null) => (v === null ? null : Buffer.from(v, 'base64'));
  const calls: StoredCall[] = (r.calls ?? []).map((c) => ({
    id: c.id,
    turn: c.turn,
    ordinal: c.ordinal,
    kind: c.kind,
    toolName: c.tool_name,
    status: c.status,
    fenceEpoch: c.fence_epoch,
    requestHash: c.request_hash,
    responseHash: c.response_hash,
    route: c.route,
    versions: c.versions,
    request: verified('request', c.id, b64(c.request), c.request_content_hash, c.request_hash),
    response: verified('response', c.id, b64(c.response), c.response_content_hash, c.response_hash),
    completedAt: c.completed_at === null ? null : new Date(c.completed_at),
  }));
  const notes: NoteRow[] = r.notes ?? [];
  if (r.turn === null) return { checkpoint: null, caseType: r.case_type, head, calls, notes };
  const held = heldStateHash !== null && r.state_hash === heldStateHash;
  if (held) {
    // Not read back: the paper must still be there under the recorded hash.
    if (r.content_hash === null) throw new PaperMissing(r.state_paper_id!);
    if (r.content_hash !== r.state_hash) throw new PaperCorrupt(r.state_paper_id!, r.state_hash!, r.content_hash);
  } else {
    if (r.bytes === null) throw new PaperMissing(r.state_paper_id!);
    const actual = contentHash(r.bytes);
    if (actual !== r.state_hash || r.content_hash !== r.state_hash) throw new PaperCorrupt(r.state_paper_id!, r.state_hash!, actual);
  }
  return {
    checkpoint: { turn: r.turn, statePaperId: r.state_paper_id!, stateHash: r.state_hash!, contextHash: r.context_hash, versions: r.versions, fenceEpoch: r.fence_epoch!, bytes: held ? null : r.bytes },
    caseType: r.case_type,
    head,
    calls,
    notes,
  };
}
