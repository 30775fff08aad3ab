/**
 * Ledger verification for operators: the whole chain of a case recomputed, and its head.
 *
 * The chain proves every record up to the head; only the head itself can say the tail is
 * complete. A tail removed together with a rewound head still verifies, so the report names
 * the head (seq + hash): an operator who kept an earlier head sees it was at a higher seq, or
 * that the record at that seq now has another hash. Rows and head are read in ONE read-only
 * snapshot, so appends racing the check never look like a broken head.
 */
import type { Db, Queryable } from './db.js';
import { verifyChain } from './ledgerHash.js';
import type { LedgerHead, LedgerVerdict } from './ledgerHash.js';
import { selectLedger, selectLedgerHead } from './sql/ledger.js';
import type { LedgerRow } from './sql/ledger.js';

export interface LedgerVerification extends LedgerVerdict {
  readonly caseId: string;
  /** The head as `ledger_heads` records it (null: the case never had a record). */
  readonly head: LedgerHead | null;
  /** The newest record read, with its stored hash (null: no record). */
  readonly lastRecord: { readonly seq: number; readonly hash: string } | null;
}

const PAGE = 5000;

async function readChain(q: Queryable, caseId: string): Promise<{ rows: LedgerRow[]; head: LedgerHead | null }> {
  const rows: LedgerRow[] = [];
  for (let after = 0; ; ) {
    const page = (await q.query<LedgerRow>(selectLedger(caseId, after, PAGE))).rows;
    rows.push(...page);
    if (page.length < PAGE) break;
    after = page.at(-1)!.seq;
  }
  const h = (await q.query<{ seq: number | string; hash: string }>(selectLedgerHead(caseId))).rows[0];
  return { rows, head: h ? { seq: Number(h.seq), hash: h.hash } : null };
}

export async function verifyCaseLedger(db: Db, caseId: string): Promise<LedgerVerification> {
  const { rows, head } = await db.transaction(async (tx) => {
    await tx.query({ text: 'SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY' });
    return readChain(tx, caseId);
  });
  const verdict = verifyChain(
    rows.map((r) => ({ caseId: r.case_id, seq: Number(r.seq), recordId: r.record_id, kind: r.kind, body: r.body, prevHash: r.prev_hash, hash: r.hash, createdAt: r.created_at.toISOString() })),
    head,
  );
  const last = rows.at(-1);
  return { caseId, ...verdict, head, lastRecord: last ? { seq: Number(last.seq), hash: last.hash } : null };
}
