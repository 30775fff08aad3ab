/**
 * Retention (issue 15 item 3, seed D49: retention is configuration): one pass prunes each kind
 * in bounded batches — one statement of at most `batchRows` rows, its own short transaction,
 * then `pauseMs` before the next — until a batch comes back short. What each kind may delete,
 * and why nothing still needs it, is in sql/retention.ts. The ledger is never touched.
 */
import type { Db, Sql } from './db.js';
import { pruneInboxBatch, pruneOutboxBatch, prunePapersBatch } from './sql/retention.js';

export const RETENTION_KINDS = ['inbox', 'outbox', 'papers'] as const;
export type RetentionKind = (typeof RETENTION_KINDS)[number];

/** A resolved policy: days per kind (null: kept forever) and the batch shape. */
export interface RetentionPolicy {
  readonly days: Readonly<Record<RetentionKind, number | null>>;
  readonly batchRows: number;
  readonly pauseMs: number;
}

export interface RetentionPassOptions {
  /** Stops the pass between batches (shutdown); what was deleted stays deleted. */
  readonly signal?: AbortSignal;
  /** Told after every batch that deleted something. */
  readonly onPruned?: (kind: RetentionKind, rows: number) => void;
}

function batchOf(kind: RetentionKind, days: number, limit: number): Sql {
  switch (kind) {
    case 'inbox':
      return pruneInboxBatch(days, limit);
    case 'outbox':
      return pruneOutboxBatch(days, limit);
    case 'papers':
      return prunePapersBatch(days, limit);
  }
}

/** One retention pass over every kind the policy prunes; returns the rows deleted per kind. */
export async function retentionPass(db: Db, policy: RetentionPolicy, opts: RetentionPassOptions = {}): Promise<Record<RetentionKind, number>> {
  const pruned: Record<RetentionKind, number> = { inbox: 0, outbox: 0, papers: 0 };
  for (const kind of RETENTION_KINDS) {
    const days = policy.days[kind];
    if (days === null) continue;
    for (;;) {
      if (opts.signal?.aborted) return pruned;
      const rows = (await db.query(batchOf(kind, days, policy.batchRows))).rowCount ?? 0;
      pruned[kind] += rows;
      if (rows > 0) opts.onPruned?.(kind, rows);
      if (rows < policy.batchRows) break;
      if (policy.pauseMs > 0) await new Promise((r) => setTimeout(r, policy.pauseMs));
    }
  }
  return pruned;
}
