/**
 * The live ledger timeline of one case, as a pure value (seed 004 §11: the UI reconnects from
 * its ledger cursor, deduplicates by sequence, refreshes the affected resource).
 *
 * Invariants:
 * - `entries` holds each seq at most once, in ascending order: a record delivered twice (a
 *   replay after reconnect overlapping what was already shown) is counted in `duplicates` and
 *   otherwise ignored.
 * - `cursor` is the highest seq received; a reconnect asks for `after=cursor`, so nothing the
 *   server sends again is needed and nothing after it is skipped.
 * - Gaps are never hidden: `gapsOf` names every missing seq between 1 and the cursor, and each
 *   record's `prevHash` is checked against the hash of the record before it.
 */
import type { LedgerEntry } from './api.js';

export interface Timeline {
  readonly entries: readonly LedgerEntry[];
  readonly cursor: number;
  readonly duplicates: number;
}

/** The prevHash of a case's first record (libs/store ledgerHash.ts). */
const LEDGER_GENESIS = 'genesis';

export const EMPTY_TIMELINE: Timeline = { entries: [], cursor: 0, duplicates: 0 };

export function receive(t: Timeline, incoming: readonly LedgerEntry[]): Timeline {
  if (incoming.length === 0) return t;
  const bySeq = new Map(t.entries.map((e) => [e.seq, e]));
  let duplicates = t.duplicates;
  for (const e of incoming) {
    if (bySeq.has(e.seq)) duplicates += 1;
    else bySeq.set(e.seq, e);
  }
  const entries = [...bySeq.values()].sort((a, b) => a.seq - b.seq);
  return { entries, cursor: Math.max(t.cursor, entries.at(-1)?.seq ?? 0), duplicates };
}

/** Seqs missing between 1 and the cursor (a contiguous chain has none). */
export function gapsOf(t: Timeline): number[] {
  const missing: number[] = [];
  let expected = 1;
  for (const e of t.entries) {
    for (; expected < e.seq; expected++) missing.push(expected);
    expected = e.seq + 1;
  }
  return missing;
}

/** Whether a record links to the one before it: null when that one is not shown (a gap). */
export function linkedToPrevious(entries: readonly LedgerEntry[], index: number): boolean | null {
  const e = entries[index];
  if (!e) return null;
  if (e.seq === 1) return e.prevHash === LEDGER_GENESIS;
  const prev = entries[index - 1];
  if (!prev || prev.seq !== e.seq - 1) return null;
  return e.prevHash === prev.hash;
}

/** Parses one SSE `data:` payload into a ledger entry, or undefined when it is not one. */
export function parseLedgerEvent(data: string): LedgerEntry | undefined {
  try {
    const v = JSON.parse(data) as Partial<LedgerEntry>;
    if (typeof v.seq !== 'number' || !Number.isSafeInteger(v.seq) || v.seq < 1 || typeof v.kind !== 'string') return undefined;
    return v as LedgerEntry;
  } catch {
    return undefined;
  }
}
