import { describe, expect, it } from 'vitest';
import { LEDGER_GENESIS, ledgerRecordHash, verifyChain } from '../src/ledgerHash.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { sha256Hex } from '@everdict/contracts';
import { loadMigrations, migrationsDir } from '../src/migrate.js';
import { translateDbError } from '../src/errors.js';

function build(n: number) {
  const rows = [];
  let prev = LEDGER_GENESIS;
  for (let seq = 1; seq <= n; seq++) {
    const r = { caseId: 'c', seq, recordId: `r${seq}`, kind: 'k', body: { seq }, prevHash: prev, createdAt: '2026-01-01T00:00:00.000Z' };
    const hash = ledgerRecordHash(r);
    rows.push({ ...r, hash });
    prev = hash;
  }
  return { rows, head: { seq: n, hash: prev } };
}

describe('ledger chain (pure)', () => {
  it('verifies an intact chain and an empty one', () => {
    const { rows, head } = build(5);
    expect(verifyChain(rows, head)).toEqual({ ok: true, records: 5 });
    expect(verifyChain([], { seq: 0, hash: LEDGER_GENESIS })).toEqual({ ok: true, records: 0 });
    expect(verifyChain([], null)).toEqual({ ok: true, records: 0 });
  });

  it('the hash depends on every field', () => {
    const base = { caseId: 'c', seq: 1, recordId: 'r', kind: 'k', body: { a: 1 }, prevHash: 'p', createdAt: 't' };
    const h = ledgerRecordHash(base);
    for (const [k, v] of Object.entries({ caseId: 'd', seq: 2, recordId: 's', kind: 'j', body: { a: 2 }, prevHash: 'q', createdAt: 'u' })) {
      expect(ledgerRecordHash({ ...base, [k]: v }), k).not.toBe(h);
    }
    // Key order inside the body does not matter (RFC 8785).
    expect(ledgerRecordHash({ ...base, body: { b: 1, a: 2 } })).toBe(ledgerRecordHash({ ...base, body: { a: 2, b: 1 } }));
  });

  it('names the first broken seq', () => {
    const { rows, head } = build(5);
    const edited = rows.map((r) => (r.seq === 3 ? { ...r, body: { seq: 33 } } : r));
    expect(verifyChain(edited, head).problem).toEqual({ seq: 3, reason: 'hash_mismatch' });
    expect(verifyChain(rows.slice(0, 4), head).problem?.reason).toBe('head_mismatch');
    expect(verifyChain([rows[0]!, rows[2]!], head).problem).toEqual({ seq: 2, reason: 'gap' });
  });
});

describe('migrations (pure)', () => {
  it('the shipped migrations are contiguous, literal SQL, checksummed over their bytes', () => {
    const ms = loadMigrations();
    expect(ms.map((m) => m.version)).toEqual(ms.map((_, i) => i + 1));
    for (const m of ms) {
      expect(m.sql, m.name).not.toMatch(/\{\{/);
      expect(m.checksum, m.name).toBe(sha256Hex(readFileSync(join(migrationsDir(), `${m.name}.sql`))));
    }
  });
});

describe('SQLSTATE translation', () => {
  it.each([
    ['23505', 'duplicate_key'],
    ['23514', 'constraint_violation'],
    ['40001', 'transaction_conflict'],
    ['40P01', 'transaction_conflict'],
    ['57P01', 'database_unavailable'],
    ['08006', 'database_unavailable'],
  ])('%s → %s', (sqlstate, code) => {
    const err = Object.assign(new Error('x'), { code: sqlstate });
    expect(translateDbError(err)).toMatchObject({ code });
  });

  it('passes unknown errors through untouched', () => {
    const err = Object.assign(new Error('x'), { code: '42P01' });
    expect(translateDbError(err)).toBe(err);
  });
});

describe('inbox insert rendering', async () => {
  const { insertInbox } = await import('../src/sql/inbox.js');
  const id = '01934b7e-0000-7000-8000-000000000001';
  const hash = `sha256:${'ab'.repeat(32)}`;

  it('inlines only closed, validated shapes so BEGIN can travel with it', () => {
    const q = insertInbox('turn-worker', id, hash, 'task.runnable', 'applied');
    expect(q.values ?? []).toEqual([]);
    expect(q.text).toContain(`'${id}'::uuid`);
    // On Postgres the same literals execute the session's prepared insert.
    expect(q.sessionPrepared?.execute).toBe(`EXECUTE ev_inbox_insert ('turn-worker', '${id}'::uuid, '${hash}', 'task.runnable', 'applied')`);
    expect(q.sessionPrepared?.prepare).toMatch(/^PREPARE ev_inbox_insert \(text, uuid, text, text, inbox_disposition\) AS INSERT INTO inbox_messages/);
  });

  it('renders a batch both ways: VALUES rows, and array literals for the session statement', async () => {
    const { insertInboxBatch } = await import('../src/sql/inbox.js');
    const other = '01934b7e-0000-7000-8000-000000000002';
    const q = insertInboxBatch('gate', [
      { messageId: id, payloadHash: hash, type: 'gate.requested' },
      { messageId: other, payloadHash: hash, type: 'task.runnable' },
    ]);
    expect(q.values ?? []).toEqual([]);
    expect(q.text).toContain(`('gate', '${other}'::uuid, '${hash}', 'task.runnable', 'applied')`);
    expect(q.sessionPrepared?.execute).toBe(`EXECUTE ev_inbox_insert_batch ('gate', '{${id},${other}}', '{${hash},${hash}}', '{gate.requested,task.runnable}')`);
    expect(() => insertInboxBatch('gate', [{ messageId: "1' OR '1'='1", payloadHash: hash, type: 'task.runnable' }])).toThrow(/cannot be inlined/);
  });

  it.each([
    ['a quote in the consumer', "x'; DROP TABLE tasks; --", id, hash, 'task.runnable'],
    ['a non-uuid id', 'gate', "1' OR '1'='1", hash, 'task.runnable'],
    ['a free-form hash', 'gate', id, "sha256:zz'", 'task.runnable'],
    ['an odd type', 'gate', id, hash, "task.runnable'"],
  ])('falls back to bind parameters for %s', (_label, consumer, messageId, payloadHash, type) => {
    const q = insertInbox(consumer, messageId, payloadHash, type, 'applied');
    expect(q.values).toEqual([consumer, messageId, payloadHash, type, 'applied']);
    expect(q.text).not.toContain(messageId);
    expect(q.sessionPrepared).toBeUndefined();
  });
});
