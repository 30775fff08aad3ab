import { describe, expect, it } from 'vitest';
import { chainNext, LEDGER_GENESIS, verifyChain } from '../src/ledgerHash.js';

describe('chainNext: the one chain rule', () => {
  const caseId = '0190c0de-0000-7000-8000-0000000000ca';
  const at = '2026-01-02T03:04:05.678Z';

  it('starts an empty chain at genesis and links each record to the head it was chained to', () => {
    const first = chainNext(caseId, null, { recordId: 'r1', kind: 'turn', body: { turn: 0 } }, at);
    expect(first).toMatchObject({ seq: 1, recordId: 'r1', kind: 'turn', body: { turn: 0 }, prevHash: LEDGER_GENESIS, createdAt: at });
    // The genesis head a case is opened with chains the same as no head at all.
    expect(chainNext(caseId, { seq: 0, hash: LEDGER_GENESIS }, { recordId: 'r1', kind: 'turn', body: { turn: 0 } }, at)).toEqual(first);
    const second = chainNext(caseId, first, { recordId: 'r2', kind: 'task_parked', body: undefined }, at);
    expect(second).toMatchObject({ seq: 2, prevHash: first.hash, body: {} });
    const rows = [first, second].map((r) => ({ ...r, caseId }));
    expect(verifyChain(rows, { seq: 2, hash: second.hash })).toEqual({ ok: true, records: 2 });
  });

  it('is deterministic: the same record after the same head hashes the same; anything else differs', () => {
    const rec = { recordId: 'r1', kind: 'turn', body: { turn: 0 } };
    expect(chainNext(caseId, null, rec, at).hash).toBe(chainNext(caseId, null, rec, at).hash);
    expect(chainNext(caseId, null, { ...rec, recordId: 'r9' }, at).hash).not.toBe(chainNext(caseId, null, rec, at).hash);
    expect(chainNext(caseId, { seq: 4, hash: 'sha256:x' }, rec, at)).toMatchObject({ seq: 5, prevHash: 'sha256:x' });
  });
});
