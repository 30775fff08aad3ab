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
 *   that is not durable.
 * Batching is natural: while `concurrency` statements are in flight, new writes queue; each
 * statement takes everything queued (up to `maxBatch`). An idle committer writes at once.
 */
import { isEverdictError } from '@everdict/contracts';
import { StaleFence } from './errors.js';
import { journalItem, turnWritten, withRecordId, writeTurn, writeTurnAlone } from './journal.js';
import type { TurnWrite, TurnWritten } from './journal.js';
import type { LedgerHead } from './ledgerHash.js';
import { writeJournals } from './sql/journal.js';
import type { JournalWriteResult } from './sql/journal.js';
import type { Store } from './store.js';
import type { FenceToken } from './unitOfWork.js';

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
  resolve(r: TurnWritten): void;
  reject(err: unknown): void;
}

export class JournalCommitter {
  private queue: Pending[] = [];
  private inFlight = 0;
  private scheduled = false;
  private readonly maxBatch: number;
  private readonly concurrency: number;
  /** Statements written and the task writes they carried (for the benchmark and metrics). */
  statements = 0;
  writes = 0;

  constructor(
    private readonly store: Store,
    opts: JournalCommitterOptions = {},
  ) {
    this.maxBatch = Math.max(1, opts.maxBatch ?? 200);
    this.concurrency = Math.max(1, opts.concurrency ?? 2);
  }

  /** Writes one task's turn write with the next statement; resolves once it committed. */
  write(token: FenceToken, caseId: string, write: TurnWrite, head: LedgerHead | null): Promise<TurnWritten> {
    const w = withRecordId(write);
    // A ledger record with an unknown head needs the head lock: a unit of work of its own.
    if (w.ledger !== null && head === null) return writeTurnAlone(this.store, token, caseId, w, null);
    return new Promise<TurnWritten>((resolve, reject) => {
      this.queue.push({ token, caseId, w, head, resolve, reject });
      this.kick();
    });
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
    for (const p of this.queue) {
      const clash = p.w.ledger !== null && ledgerCases.has(p.caseId);
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
      const items = batch.map((p) => journalItem(p.token, p.caseId, p.w, p.head));
      const { rows } = await this.store.db.query<JournalWriteResult>(writeJournals(items));
      this.statements++;
      this.writes += batch.length;
      for (const r of rows) {
        const p = batch[r.idx]!;
        if (!r.fenced) {
          this.store.metrics.staleFence('write_journal');
          p.reject(new StaleFence(p.token.taskId, p.token.epoch, 'write_journal'));
        } else if (!r.applied) {
          this.store.unitOfWork((uow) => writeTurn(uow, p.token, p.caseId, p.w)).then(p.resolve, p.reject);
        } else {
          p.resolve(turnWritten(r, items[r.idx]!));
        }
      }
    } catch (err) {
      // The statement as a whole failed (a deadlock with a cancel, a constraint): nothing of it
      // was written. Each write is redone alone, so one bad part cannot sink the others — but a
      // database that is down fails every part alike: each gets the retryable error at once.
      if (batch.length === 1 || isEverdictError(err, 'database_unavailable')) for (const p of batch) p.reject(err);
      else for (const p of batch) writeTurnAlone(this.store, p.token, p.caseId, p.w, p.head).then(p.resolve, p.reject);
    } finally {
      this.inFlight--;
      this.kick();
    }
  }
}
