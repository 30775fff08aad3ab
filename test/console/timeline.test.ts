/**
 * The console's ledger timeline as a pure value (console/src/ledgerTimeline.ts): a record seen
 * twice is kept once and counted, the cursor is the highest seq seen, missing seqs are named, and
 * each record's prevHash is checked against the record shown before it.
 */
import { describe, expect, it } from 'vitest';
import type { LedgerEntry } from '../../console/src/api.js';
import { EMPTY_TIMELINE, gapsOf, linkedToPrevious, parseLedgerEvent, receive } from '../../console/src/ledgerTimeline.js';

const entry = (seq: number, prevHash = seq === 1 ? 'genesis' : `h${seq - 1}`): LedgerEntry => ({ seq, recordId: `r${seq}`, kind: 'turn', body: {}, prevHash, hash: `h${seq}`, createdAt: '2026-01-01T00:00:00.000Z' });

describe('ledger timeline', () => {
  it('keeps each seq once, in order, and counts what came twice', () => {
    const t = receive(receive(EMPTY_TIMELINE, [entry(1), entry(2), entry(3)]), [entry(3), entry(2), entry(4)]);
    expect(t.entries.map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    expect(t.duplicates).toBe(2);
    expect(t.cursor).toBe(4);
  });

  it('names every missing seq up to the cursor', () => {
    const t = receive(EMPTY_TIMELINE, [entry(1), entry(4), entry(2), entry(7)]);
    expect(gapsOf(t)).toEqual([3, 5, 6]);
    expect(t.cursor).toBe(7);
    expect(gapsOf(receive(EMPTY_TIMELINE, [entry(1), entry(2)]))).toEqual([]);
  });

  it('checks each record links to the one before it', () => {
    const t = receive(EMPTY_TIMELINE, [entry(1), entry(2), entry(3, 'forged'), entry(5)]);
    expect(t.entries.map((_, i) => linkedToPrevious(t.entries, i))).toEqual([true, true, false, null]);
  });

  it('parses a ledger event, and refuses what is not one', () => {
    expect(parseLedgerEvent(JSON.stringify(entry(9)))?.seq).toBe(9);
    expect(parseLedgerEvent('{"seq": 0, "kind": "turn"}')).toBeUndefined();
    expect(parseLedgerEvent('{"kind": "turn"}')).toBeUndefined();
    expect(parseLedgerEvent('not json')).toBeUndefined();
  });
});
