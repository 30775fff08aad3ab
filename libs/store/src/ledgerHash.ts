/**
 * The ledger's chain hash (pure). Each record's hash covers its identity, content, time and
 * the previous record's hash, so editing, removing or reordering any row breaks the chain.
 */
import { canonicalJson, sha256Hex } from '@everdict/contracts';

export const LEDGER_GENESIS = 'genesis';

interface LedgerRecordFields {
  caseId: string;
  seq: number;
  recordId: string;
  kind: string;
  body: unknown;
  prevHash: string;
  createdAt: string; // ISO-8601 with milliseconds, exactly as stored
}

/** Callers build `r` with its keys in canonical order (body, caseId, …, seq): canonicalJson then writes it in one native pass. */
export function ledgerRecordHash(r: LedgerRecordFields): string {
  return `sha256:${sha256Hex(canonicalJson(r))}`;
}

/** A case's chain head: seq and hash of its newest record (seq 0, genesis: an empty chain). */
export interface LedgerHead {
  readonly seq: number;
  readonly hash: string;
}

/** A record placed on its case's chain: everything the ledger row stores but the case id. */
export interface ChainedRecord {
  readonly seq: number;
  readonly recordId: string;
  readonly kind: string;
  readonly body: unknown;
  readonly prevHash: string;
  readonly createdAt: string;
  readonly hash: string;
}

/**
 * THE chain rule, for every path that appends (a unit of work's append, the journal statement):
 * the record after `head` takes the next seq, the head's hash as its prevHash (genesis on an
 * empty chain), and the hash of all of it. A missing body is stored as `{}`. Appending it is
 * valid only while `head` is still the case's head, which each caller makes sure of (a lock or a
 * compare-and-set); a caller that lost the race chains the SAME record id after the new head.
 */
export function chainNext(caseId: string, head: LedgerHead | null | undefined, rec: { readonly recordId: string; readonly kind: string; readonly body: unknown }, createdAt: string): ChainedRecord {
  const seq = (head?.seq ?? 0) + 1;
  const prevHash = head?.hash ?? LEDGER_GENESIS;
  const body = rec.body ?? {};
  const { recordId, kind } = rec;
  return { seq, recordId, kind, body, prevHash, createdAt, hash: ledgerRecordHash({ body, caseId, createdAt, kind, prevHash, recordId, seq }) };
}

export interface LedgerVerdict {
  ok: boolean;
  records: number;
  /** First problem found, naming the seq where the chain breaks. */
  problem?: { seq: number; reason: 'hash_mismatch' | 'broken_link' | 'gap' | 'head_mismatch' };
}

/** Verifies a full chain (ordered by seq) against its recorded head. */
export function verifyChain(rows: readonly (LedgerRecordFields & { hash: string })[], head: { seq: number; hash: string } | null): LedgerVerdict {
  let prev = LEDGER_GENESIS;
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i]!;
    if (r.seq !== i + 1) return { ok: false, records: rows.length, problem: { seq: i + 1, reason: 'gap' } };
    if (r.prevHash !== prev) return { ok: false, records: rows.length, problem: { seq: r.seq, reason: 'broken_link' } };
    const stored = r.hash;
    const h = ledgerRecordHash({ body: r.body, caseId: r.caseId, createdAt: r.createdAt, kind: r.kind, prevHash: r.prevHash, recordId: r.recordId, seq: r.seq });
    if (stored !== h) return { ok: false, records: rows.length, problem: { seq: r.seq, reason: 'hash_mismatch' } };
    prev = h;
  }
  const lastSeq = rows.length;
  if ((head?.seq ?? 0) !== lastSeq || (head !== null && head.hash !== prev)) {
    return { ok: false, records: rows.length, problem: { seq: Math.max(lastSeq, head?.seq ?? 0), reason: 'head_mismatch' } };
  }
  return { ok: true, records: rows.length };
}
