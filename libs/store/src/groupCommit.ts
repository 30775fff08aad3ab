/**
 * Group commit of turn writes. A turn-worker runs many tasks at once; their journal writes
 * (model intents, responses with tool intents, outcomes with checkpoints and ledger records)
 * that fall due together are written by ONE statement (`writeJournals`) instead of one each, so
 * the cost of a round trip and a WAL flush is shared by every task in the batch.
 *
 * Invariants (the statement keeps them per task, see writeJournals):
 * - each task's part is fenced on its own — a stale part writes nothing and fails with
 *   StaleFence (counted), the rest of the batch commits;
 * - a part whose ledger compare-and-set lost (its case's head moved) writes nothing and is
 *   redone alone under the head lock, with the same record id; at most one ledger record per
 *   case goes into a batch;
 * - a write resolves only after its statement committed, so a caller never acts on a write
 *   that is not durable — except a write the caller asked to defer (below), which resolves once
 *   committed and visible, and is durable once the WAL is flushed.
 * Batching is natural: while `concurrency` statements are in flight, new writes queue; each
 * statement takes everything queued (up to `maxBatch`). An idle committer writes at once.
 *
 * Deferred durability (`deferDurability`): the statement runs as a transaction of its own on a
 * session with `synchronous_commit = off` (Db.queryDeferred), so its COMMIT does not wait for
 * the WAL flush. Postgres flushes WAL in order, so the next synchronous commit of any
 * transaction makes it durable too, and a Postgres crash before that loses it together with
 * everything committed after it. Only a write that nobody outside the database acts on may be
 * deferred: one with a ledger record, an outbox row or a task transition is always synchronous,
 * whatever the caller asked (the broker, the parent and the auditor act on those). Deferred and
 * synchronous writes never share a statement: a deferred one never waits for a WAL flush.
 *
 * Writes that move the case (`caseCause`: a task's finish) are group-committed with each other
 * in a unit of work that re-derives each part's case state after the statement, so the state
 * is written in the same transaction as the transition that changed it (seed 004 §11.1); the
 * other writes never wait on those refreshes. Such a batch is sent with the case states it is
 * expected to derive, in one round trip, once its kind of write derived the same twice running
 * (expectations, below); a derivation that gives anything else rolls it back whole.
 */
import { isEverdictError, newId } from '@everdict/contracts';
import { changeOf, derivationStatements, derivedRows, refreshCaseState, refreshCaseStates } from './caseState.js';
import type { CaseStateCause, CaseStateRefresh } from './caseState.js';
import type { Sql } from './db.js';
import { StaleFence } from './errors.js';
import { StoredBlocks } from './history.js';
import { journalItem, turnWritten, withRecordId, writeTurn, writeTurnAlone } from './journal.js';
import type { TurnWrite, TurnWritten } from './journal.js';
import { chainNext } from './ledgerHash.js';
import type { LedgerHead } from './ledgerHash.js';
import { REFRESH_SET_MIN, refreshCaseStateExpecting } from './sql/caseState.js';
import type { CaseStateChange, CaseStateOutcome } from './sql/caseState.js';
import { appendLedgerRecords } from './sql/ledger.js';
import { writeJournals } from './sql/journal.js';
import type { JournalWriteItem, JournalWriteResult } from './sql/journal.js';
import type { Store } from './store.js';
import { assertStrictAppend } from './unitOfWork.js';
import type { FenceToken, UnitOfWork } from './unitOfWork.js';

export interface CommitterWriteOptions {
  /**
   * Commit without waiting for the WAL flush (default false). Honoured only for a write with no
   * ledger record, no outbox row and no task transition; any other write is synchronous.
   */
  readonly deferDurability?: boolean;
  /**
   * The write's transition can change the case's state (a task's finish): the case state is
   * re-derived (caseState.ts) in the same transaction as the write, after it. Such writes are
   * group-committed with each other in a unit of work, never deferred. Default: none.
   */
  readonly caseCause?: CaseStateCause;
  /**
   * With caseCause: what kind of write this is for the case state it leads to (e.g. a root
   * task's finish). The committer learns what each kind's writes derived; once two in a row
   * derived the same, the next ones of that kind send their `case_state` record with their
   * derivation, which checks it (expectations, below). Default: none (derived first, always).
   */
  readonly expectKey?: string;
}

/**
 * Executes `w` in a unit of work and, when `cause` is given, re-derives the case state after it
 * in the same unit of work; the head returned is the case's newest record (the `case_state`
 * record when one was appended).
 */
export async function writeTurnMovingCase(uow: UnitOfWork, token: FenceToken, caseId: string, w: TurnWrite, cause: CaseStateCause | null): Promise<TurnWritten> {
  const done = await writeTurn(uow, token, caseId, w);
  return cause === null ? done : withCaseState(done, await refreshCaseState(uow, caseId, cause));
}

const withCaseState = (done: TurnWritten, r: Awaited<ReturnType<typeof refreshCaseState>>): TurnWritten =>
  r?.appended ? { ...done, head: { seq: r.appended.seq, hash: r.appended.hash } } : done;

/** What one statement carries: writes of one kind only. */
type BatchKind = 'sync' | 'deferred' | 'moving';

interface JournalCommitterOptions {
  /** Most task writes per statement (default 200). */
  readonly maxBatch?: number;
  /** Statements in flight at once (default 2). */
  readonly concurrency?: number;
}

interface Pending {
  readonly token: FenceToken;
  readonly caseId: string;
  readonly w: TurnWrite;
  readonly head: LedgerHead | null;
  /** sync: a statement of its own; deferred: `synchronous_commit = off`; moving: with its case state. */
  readonly kind: BatchKind;
  readonly cause: CaseStateCause | null;
  readonly expectKey: string | null;
  resolve(r: TurnWritten): void;
  reject(err: unknown): void;
}

export class JournalCommitter {
  private queue: Pending[] = [];
  private inFlight = 0;
  private scheduled = false;
  private readonly maxBatch: number;
  private readonly concurrency: number;
  /** Content-keyed blocks (request tails, spans) its committed statements carried: not carried again. */
  private readonly stored = new StoredBlocks();
  /** What each kind of moving write (expectKey) derived last, and how many times running. */
  private readonly learned = new Map<string, { outcome: CaseStateOutcome; times: number }>();
  /** Statements written outside a unit of work and the task writes of every statement (for the benchmark and metrics). */
  statements = 0;
  writes = 0;
  /** Moving batches sent with the case states they expected: met (one round trip), unmet (rolled back, derived first). */
  readonly expectations = { met: 0, unmet: 0 };

  constructor(
    private readonly store: Store,
    opts: JournalCommitterOptions = {},
  ) {
    this.maxBatch = Math.max(1, opts.maxBatch ?? 200);
    this.concurrency = Math.max(1, opts.concurrency ?? 2);
  }

  /** Writes one task's turn write with the next statement; resolves once it committed. */
  write(token: FenceToken, caseId: string, write: TurnWrite, head: LedgerHead | null, opts: CommitterWriteOptions = {}): Promise<TurnWritten> {
    const w = withRecordId(write);
    const cause = opts.caseCause ?? null;
    // A ledger record with an unknown head needs the head lock: a unit of work of its own.
    if (w.ledger !== null && head === null) return this.alone(token, caseId, w, null, cause);
    const deferred = opts.deferDurability === true && cause === null && w.ledger === null && (w.outbox ?? []).length === 0 && (w.transition ?? null) === null;
    const kind: BatchKind = cause !== null ? 'moving' : deferred ? 'deferred' : 'sync';
    return new Promise<TurnWritten>((resolve, reject) => {
      this.queue.push({ token, caseId, w, head, kind, cause, expectKey: cause === null ? null : (opts.expectKey ?? null), resolve, reject });
      this.kick();
    });
  }

  /** One write on its own: as one statement, or with its case state in a unit of work. */
  private alone(token: FenceToken, caseId: string, w: TurnWrite, head: LedgerHead | null, cause: CaseStateCause | null): Promise<TurnWritten> {
    if (cause === null) return writeTurnAlone(this.store, token, caseId, w, head);
    return this.store.unitOfWork((uow) => writeTurnMovingCase(uow, token, caseId, w, cause));
  }

  private kick(): void {
    if (this.scheduled || this.inFlight >= this.concurrency || this.queue.length === 0) return;
    this.scheduled = true;
    // Writes made in the same tick join the same statement.
    queueMicrotask(() => {
      this.scheduled = false;
      if (this.inFlight < this.concurrency && this.queue.length > 0) void this.flush();
    });
  }

  private take(): Pending[] {
    const batch: Pending[] = [];
    const rest: Pending[] = [];
    const ledgerCases = new Set<string>();
    // One statement carries writes of one kind: the first queued write decides which.
    const kind = this.queue[0]?.kind ?? 'sync';
    for (const p of this.queue) {
      const clash = (p.w.ledger !== null && ledgerCases.has(p.caseId)) || p.kind !== kind;
      if (batch.length >= this.maxBatch || clash) {
        rest.push(p);
        continue;
      }
      batch.push(p);
      if (p.w.ledger !== null) ledgerCases.add(p.caseId);
    }
    this.queue = rest;
    return batch;
  }

  private async flush(): Promise<void> {
    const batch = this.take();
    if (batch.length === 0) return;
    this.inFlight++;
    this.kick();
    try {
      const items = batch.map((p) => ({ ...journalItem(p.token, p.caseId, p.w, p.head), papers: this.stored.strip(p.caseId, p.w.papers) }));
      const kind = batch[0]!.kind;
      const enqueues = items.flatMap((it) => it.outbox.map((o) => o.messageId));
      // A finish's case row is locked (after its head) by the statement that writes the finish.
      const statement = writeJournals(items, { lockCases: kind === 'moving' });
      /** Each moving part's result with its case state (the others are built from the rows). */
      const written = new Map<number, TurnWritten>();
      const rows =
        kind === 'sync'
          ? (await this.store.db.query<JournalWriteResult>(statement)).rows
          : kind === 'deferred'
            ? (await this.store.db.queryDeferred<JournalWriteResult>(statement)).rows
            : await this.moving(statement, batch, items, enqueues, written);
      if (enqueues.length > 0 && kind !== 'moving') this.store.outboxCommitted(enqueues);
      // A statement in a unit of work is counted as that unit of work (the store's transactions).
      if (kind !== 'moving') this.statements++;
      this.writes += batch.length;
      for (const r of rows) {
        const p = batch[r.idx]!;
        if (!r.fenced) {
          this.store.metrics.staleFence('write_journal');
          p.reject(new StaleFence(p.token.taskId, p.token.epoch, 'write_journal'));
        } else if (!r.applied) {
          this.store.unitOfWork((uow) => writeTurnMovingCase(uow, p.token, p.caseId, p.w, p.cause)).then(p.resolve, p.reject);
        } else {
          this.stored.committed(p.caseId, p.w.papers);
          p.resolve(written.get(r.idx) ?? turnWritten(r, items[r.idx]!));
        }
      }
    } catch (err) {
      // The statement as a whole failed (a deadlock with a cancel, a constraint): nothing of it
      // was written. Each write is redone alone, so one bad part cannot sink the others — but a
      // database that is down fails every part alike: each gets the retryable error at once.
      if (batch.length === 1 || isEverdictError(err, 'database_unavailable')) for (const p of batch) p.reject(err);
      else for (const p of batch) this.alone(p.token, p.caseId, p.w, p.head, p.cause).then(p.resolve, p.reject);
    } finally {
      this.inFlight--;
      this.kick();
    }
  }

  /**
   * A batch of finishes (caseCause) in one unit of work: the statement, then each applied part's
   * case state derived and its `case_state` record appended, before COMMIT. A case has at most
   * one part here (every finish carries a ledger record, and a batch one record per case); its
   * head is then that record.
   *
   * The derivations go in one round trip with the statement (and its BEGIN), and the
   * `case_state` records with the COMMIT: two round trips, not four (one when expected:
   * asExpected). The derivations are run for every part's case before the statement's rows are
   * seen, which is right only when every part was written; if one was not (a stale fence, a
   * ledger head that moved), the unit of work is rolled back and run again the long way, where
   * only the applied parts are derived.
   */
  private async moving(statement: Sql, batch: readonly Pending[], items: readonly JournalWriteItem[], enqueues: readonly string[], written: Map<number, TurnWritten>): Promise<JournalWriteResult[]> {
    const expected = this.expected(batch);
    if (expected !== null) {
      const met = await this.store
        .unitOfWork((uow) => this.asExpected(uow, statement, batch, items, enqueues, written, expected))
        .catch((err: unknown) => {
          if (isEverdictError(err, 'case_state_unexpected')) return null;
          throw err;
        });
      if (met !== null) {
        this.expectations.met++;
        return met;
      }
      this.expectations.unmet++;
      written.clear();
    }
    const caseIds = [...new Set(batch.map((p) => p.caseId))].sort();
    const optimistic = await this.store
      .unitOfWork(async (uow) => {
        const [head, ...derivations] = await uow.queryMany([statement, ...derivationStatements(caseIds)]);
        const rows = head!.rows as JournalWriteResult[];
        if (rows.length !== batch.length || !rows.every((r) => r.fenced && r.applied)) throw new NotEveryPartWritten();
        const derived = derivedRows(derivations);
        for (const p of batch) {
          const row = derived.get(p.caseId);
          if (p.expectKey !== null && row !== undefined) this.learn(p.expectKey, row);
        }
        return this.caseStates(uow, rows, batch, items, enqueues, written, derived);
      })
      .catch((err: unknown) => {
        if (err instanceof NotEveryPartWritten) return null;
        throw err;
      });
    if (optimistic !== null) return optimistic;
    written.clear();
    return this.store.unitOfWork(async (uow) => this.caseStates(uow, (await uow.query<JournalWriteResult>(statement)).rows, batch, items, enqueues, written));
  }

  /**
   * Expectations. A finish's `case_state` record is chained and hashed here, so without one the
   * record can only be sent once its derivation answered: a round trip more than a plain turn's
   * write, in the unit of work that holds the case's locks. What a kind of finish (expectKey)
   * derives is mostly what the same kind derived before (a root's finish leaves its case waiting
   * to tell the customer, a child's leaves it running). Once two finishes of a kind in a row
   * derived the same, a batch of such finishes is sent as ONE pipeline — the statement, each
   * case's derivation told what to expect (refreshCaseStateExpecting), the records built from
   * that expectation, COMMIT. A derivation that gives anything else, or that finds its case's
   * ledger head not at the part's own record (a part not written), fails its statement: the
   * unit of work rolls back whole and the batch is done again the long way, which learns what it
   * derived. A record is therefore only ever committed with the derivation it states.
   */
  private expected(batch: readonly Pending[]): CaseStateOutcome[] | null {
    // A large batch derives its cases in one set statement (REFRESH_SET_MIN), cheaper than the
    // one-case statements an expectation is checked by.
    if (batch.length >= REFRESH_SET_MIN) return null;
    const out: CaseStateOutcome[] = [];
    for (const p of batch) {
      const known = p.expectKey === null ? undefined : this.learned.get(p.expectKey);
      if (known === undefined || known.times < 2 || p.w.ledger === null) return null;
      out.push(known.outcome);
    }
    return out;
  }

  private learn(key: string, row: CaseStateChange): void {
    const outcome: CaseStateOutcome = { from_state: row.from_state, to_state: row.to_state, from_reason: row.from_reason, to_reason: row.to_reason, why: row.why, changed: row.changed };
    const known = this.learned.get(key);
    const same = known !== undefined && sameOutcome(known.outcome, outcome);
    // Keys are kinds of finish (a small closed set); the bound only guards a caller that misuses them.
    if (!same && this.learned.size >= MAX_LEARNED) this.learned.clear();
    this.learned.set(key, { outcome, times: same ? known.times + 1 : 1 });
  }

  /** The batch as expected, in one round trip (see expected); fails with CaseStateUnexpected where it is not. */
  private async asExpected(
    uow: UnitOfWork,
    statement: Sql,
    batch: readonly Pending[],
    items: readonly JournalWriteItem[],
    enqueues: readonly string[],
    written: Map<number, TurnWritten>,
    expected: readonly CaseStateOutcome[],
  ): Promise<JournalWriteResult[]> {
    if (enqueues.length > 0) uow.outboxWritten(enqueues);
    const createdAt = new Date().toISOString();
    const refreshes: CaseStateRefresh[] = [];
    const checks: Sql[] = [];
    const records: Parameters<typeof appendLedgerRecords>[0][number][] = [];
    for (const [idx, p] of batch.entries()) {
      // The part's own record is the head its case_state record chains on.
      const own = items[idx]!.ledger!;
      const head = { seq: own.seq, hash: own.hash };
      checks.push(refreshCaseStateExpecting(p.caseId, expected[idx]!, head));
      const { refresh, record } = changeOf(expected[idx]!, p.cause!, head);
      if (record === null) {
        refreshes.push(refresh);
        continue;
      }
      const chained = chainNext(p.caseId, head, { recordId: newId(), kind: record.kind, body: record.body }, createdAt);
      records.push({ caseId: p.caseId, ...chained });
      const appended = { recordId: chained.recordId, seq: chained.seq, hash: chained.hash };
      refreshes.push({ ...refresh, appended, head: { seq: chained.seq, hash: chained.hash } });
    }
    const [head, ...rest] = await uow.commitWith([statement, ...checks, ...(records.length > 0 ? [appendLedgerRecords(records, 'strict')] : [])]);
    const rows = head!.rows as JournalWriteResult[];
    // Every derivation found its case's head at the part's own record: every part was written.
    if (rows.length !== batch.length || !rows.every((r) => r.fenced && r.applied)) throw new Error('an expected moving batch committed with a part not written');
    if (records.length > 0) assertStrictAppend(records, rest.at(-1)!);
    for (const r of rows) written.set(r.idx, withCaseState(turnWritten(r, items[r.idx]!), refreshes[r.idx]));
    return rows;
  }

  /** The case states of a moving batch's applied parts, in its unit of work after the statement. */
  private async caseStates(
    uow: UnitOfWork,
    rows: JournalWriteResult[],
    batch: readonly Pending[],
    items: readonly JournalWriteItem[],
    enqueues: readonly string[],
    written: Map<number, TurnWritten>,
    derivedBefore?: ReadonlyMap<string, CaseStateChange>,
  ): Promise<JournalWriteResult[]> {
    if (enqueues.length > 0) uow.outboxWritten(enqueues);
    const applied = rows.filter((r) => r.fenced && r.applied);
    const held = new Map(
      applied.map((r) => {
        const ledger = items[r.idx]!.ledger!;
        return [batch[r.idx]!.caseId, { state: r.case_state!, state_reason: r.case_state_reason ?? null, head_seq: ledger.seq, head_hash: ledger.hash }] as const;
      }),
    );
    // The unit of work's last statement: its `case_state` records go with the COMMIT.
    const states = await refreshCaseStates(uow, applied.map((r) => ({ caseId: batch[r.idx]!.caseId, cause: batch[r.idx]!.cause! })), held, derivedBefore, { commit: true });
    for (const r of applied) written.set(r.idx, withCaseState(turnWritten(r, items[r.idx]!), states.get(batch[r.idx]!.caseId)));
    return rows;
  }
}

/** A moving batch's optimistic unit of work found a part unwritten: it is rolled back and redone. */
class NotEveryPartWritten extends Error {}

/** The most kinds of moving write a committer remembers (expectations). */
const MAX_LEARNED = 256;

function sameOutcome(a: CaseStateOutcome, b: CaseStateOutcome): boolean {
  return (
    a.from_state === b.from_state &&
    a.to_state === b.to_state &&
    a.from_reason === b.from_reason &&
    a.to_reason === b.to_reason &&
    a.changed === b.changed &&
    a.why.length === b.why.length &&
    a.why.every((w, i) => w === b.why[i])
  );
}
