import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { seedCase, testStore } from './helpers.js';
import type { TestStore } from './helpers.js';

describe('ledger', () => {
  let t: TestStore;
  beforeAll(async () => {
    t = await testStore('ledger', 16);
  });
  afterAll(async () => t.close());

  async function chain(n: number): Promise<string> {
    const { caseId } = await seedCase(t.store);
    for (let i = 0; i < n; i++) {
      await t.store.unitOfWork((uow) => uow.appendLedger(caseId, { kind: 'note', body: { i, text: `record ${i}` } }));
    }
    return caseId;
  }

  it('an untouched chain verifies', async () => {
    const caseId = await chain(12);
    expect(await t.store.verifyLedger(caseId)).toEqual({ ok: true, records: 12 });
  });

  it('concurrent appends retry from the head and keep one contiguous chain', async () => {
    const { caseId } = await seedCase(t.store);
    await Promise.all(
      Array.from({ length: 40 }, (_, i) => t.store.unitOfWork((uow) => uow.appendLedger(caseId, { kind: 'note', body: { i } }))),
    );
    const rows = await t.store.readLedger(caseId);
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect(new Set(rows.map((r) => (r.body as { i: number }).i)).size).toBe(40);
    expect((await t.store.verifyLedger(caseId)).ok).toBe(true);
  });

  it('a colliding append (no head row to lock) retries from the new head with the same record id', async () => {
    const caseId = newId();
    await t.store.db.query({ text: `INSERT INTO cases (id, case_type, origin_key, customer) VALUES ($1, 'legacy', $2, 'acme')`, values: [caseId, `legacy-${caseId}`] });
    const ids = Array.from({ length: 10 }, () => newId());
    const appended = await Promise.all(ids.map((recordId) => t.store.unitOfWork((uow) => uow.appendLedger(caseId, { recordId, kind: 'note', body: {} }))));
    expect(appended.map((a) => a.recordId)).toEqual(ids);
    const rows = await t.store.readLedger(caseId);
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
    expect(new Set(rows.map((r) => r.record_id))).toEqual(new Set(ids));
    expect((await t.store.verifyLedger(caseId)).ok).toBe(true);
  });

  it('re-appending the same record id returns the recorded entry instead of a second one', async () => {
    const caseId = await chain(2);
    const recordId = newId();
    const first = await t.store.unitOfWork((uow) => uow.appendLedger(caseId, { recordId, kind: 'outcome', body: { x: 1 } }));
    const again = await t.store.unitOfWork((uow) => uow.appendLedger(caseId, { recordId, kind: 'outcome', body: { x: 1 } }));
    expect(again).toEqual(first);
    expect(await t.store.readLedger(caseId)).toHaveLength(3);
  });

  it('a rolled-back unit of work leaves no ledger record', async () => {
    const caseId = await chain(1);
    await expect(
      t.store.unitOfWork(async (uow) => {
        await uow.appendLedger(caseId, { kind: 'note', body: {} });
        throw new Error('handler failed');
      }),
    ).rejects.toThrow('handler failed');
    expect(await t.store.readLedger(caseId)).toHaveLength(1);
    expect((await t.store.verifyLedger(caseId)).ok).toBe(true);
  });

  const tamper: Array<[string, string, (caseId: string) => string]> = [
    ['an edited body', 'hash_mismatch', (c) => `UPDATE ledger SET body = '{"i": 99, "text": "forged"}' WHERE case_id = '${c}' AND seq = 5`],
    ['an edited kind', 'hash_mismatch', (c) => `UPDATE ledger SET kind = 'approval' WHERE case_id = '${c}' AND seq = 3`],
    ['an edited timestamp', 'hash_mismatch', (c) => `UPDATE ledger SET created_at = created_at - interval '1 day' WHERE case_id = '${c}' AND seq = 2`],
    ['a deleted middle row', 'gap', (c) => `DELETE FROM ledger WHERE case_id = '${c}' AND seq = 4`],
    ['a deleted last row', 'head_mismatch', (c) => `DELETE FROM ledger WHERE case_id = '${c}' AND seq = 8`],
    [
      'two reordered rows',
      'broken_link',
      (c) => `UPDATE ledger l SET kind = o.kind, body = o.body, prev_hash = o.prev_hash, hash = o.hash, created_at = o.created_at
                FROM ledger o
               WHERE l.case_id = '${c}' AND o.case_id = l.case_id AND ((l.seq = 3 AND o.seq = 6) OR (l.seq = 6 AND o.seq = 3))`,
    ],
    [
      'a rewritten row with a recomputed-looking hash',
      'hash_mismatch',
      (c) => `UPDATE ledger SET body = '{"i": 1}', hash = 'sha256:' || repeat('0', 64) WHERE case_id = '${c}' AND seq = 1`,
    ],
  ];

  it.each(tamper)('verifyLedger detects %s', async (_label, reason, statement) => {
    const caseId = await chain(8);
    expect((await t.store.verifyLedger(caseId)).ok).toBe(true);
    // The ledger refuses changes (migration 0006); an attacker who owns the database as superuser
    // switches its triggers off, and verification must still catch the edit.
    await t.store.db.transaction(async (tx) => {
      await tx.query({ text: 'SET LOCAL session_replication_role = replica' });
      await tx.query({ text: statement(caseId) });
    });
    const verdict = await t.store.verifyLedger(caseId);
    expect(verdict.ok).toBe(false);
    expect(verdict.problem?.reason).toBe(reason);
  });
});
