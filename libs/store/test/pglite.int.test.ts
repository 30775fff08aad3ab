/**
 * The store's essential behaviours on embedded Postgres (PGlite), file-backed in a temp dir:
 * the same migrations and SQL as on a server, plus what the one-session adapter must add —
 * a transaction lane that plain queries never join, refusal of self-deadlocking re-entry,
 * and exclusive ownership of the data directory.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { eventually } from '@everdict/testkit';
import type { Db } from '../src/db.js';
import { ConstraintViolation, DuplicateKey, StaleFence } from '../src/errors.js';
import { loadMigrations, migrate } from '../src/migrate.js';
import { DataDirLocked, EmbeddedReentry, createPgliteDb } from '../src/pglite.js';
import { Store } from '../src/store.js';
import { claimTask, loadTask, renewLeases } from '../src/tasks.js';
import type { UnitOfWork } from '../src/unitOfWork.js';
import { seedCase } from './helpers.js';

/** Closed-shape digests (the inline, session-prepared insert) and a free-form one (bind parameters). */
const AA = `sha256:${'aa'.repeat(32)}`;
const BB = `sha256:${'bb'.repeat(32)}`;
const CC = 'sha256:cc';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('embedded Postgres (PGlite) behind the Db port', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'everdict-pglite-'));
  let db: Db;
  let store: Store;
  const staleFences: string[] = [];

  const open = async () => {
    db = await createPgliteDb(dataDir);
    store = new Store(db, { metrics: { staleFence: (op) => staleFences.push(op), transaction: () => {} } });
  };

  beforeAll(open);
  afterAll(async () => {
    await db?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('migrates once (even with concurrent migrators), a second run applies nothing, CHECKs hold', async () => {
    const results = await Promise.all([migrate(db), migrate(db), migrate(db)]);
    expect(results.flatMap((r) => r.applied)).toEqual(loadMigrations().map((m) => m.name));
    expect((await migrate(db)).applied).toEqual([]);
    const { rows } = await db.query<{ n: number }>({ text: 'SELECT count(*)::int AS n FROM schema_migrations' });
    expect(rows[0]!.n).toBe(loadMigrations().length);

    await db.query({ text: `INSERT INTO cases (id, case_type, origin_key, customer) VALUES ('00000000-0000-7000-8000-0000000000a1', 't', 'o-check', 'c')` });
    await expect(
      db.query({ text: `INSERT INTO tasks (id, case_id, profile, state, park_reason) VALUES ('00000000-0000-7000-8000-0000000000a2', '00000000-0000-7000-8000-0000000000a1', 'p', 'parked', 'bored')` }),
    ).rejects.toBeInstanceOf(ConstraintViolation);
    await expect(
      db.query({ text: `INSERT INTO cases (id, case_type, origin_key, customer) VALUES ($1, 't', 'o-check', 'c')`, values: [newId()] }),
    ).rejects.toBeInstanceOf(DuplicateKey);
  });

  it('50 concurrent claims of one task: exactly one wins; int8 columns come back as numbers', async () => {
    const { taskId } = await seedCase(store);
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => store.unitOfWork((uow) => claimTask(uow, taskId, `worker-${i}`, 30_000))));
    const winners = results.filter((r) => r.claimed);
    expect(winners).toHaveLength(1);
    for (const l of results.filter((r) => !r.claimed)) {
      if (!l.claimed) expect(l.reason).toBe('leased');
    }
    const row = (await loadTask(store.db, taskId))!;
    expect(row.fence_epoch).toBe(1);
    expect(typeof row.row_version).toBe('number');
    expect(row.lease_until).toBeInstanceOf(Date);
    if (winners[0]!.claimed) expect(row.lease_owner).toBe(winners[0]!.token.owner);
    expect(await claimTask(store.db, taskId, 'late', 30_000)).toMatchObject({ claimed: false, reason: 'leased' });
  });

  it('a worker whose fence went stale cannot complete, enqueue or renew; the new holder can', async () => {
    const { caseId, taskId } = await seedCase(store);
    const a = await claimTask(store.db, taskId, 'worker-a', 150);
    if (!a.claimed) throw new Error('first claim must win');
    await sleep(300); // lease expires on the database clock
    const b = await claimTask(store.db, taskId, 'worker-b', 30_000);
    if (!b.claimed) throw new Error(`second claim must win after expiry: ${JSON.stringify(b)}`);
    expect(b.token.epoch).toBe(a.token.epoch + 1);

    const before = staleFences.length;
    await expect(store.unitOfWork((uow) => uow.transitionTask(a.token, { state: 'done' }))).rejects.toBeInstanceOf(StaleFence);
    await expect(
      store.unitOfWork((uow) => uow.enqueue({ id: newId(), type: 'task.finished', caseId }, Buffer.from('{}'), { fence: a.token })),
    ).rejects.toBeInstanceOf(StaleFence);
    expect((await renewLeases(store, a.token.owner, [{ taskId, epoch: a.token.epoch }], 30_000)).size).toBe(0);
    expect(staleFences.slice(before)).toEqual(['complete_task', 'enqueue', 'renew_lease']);
    const { rows } = await db.query<{ n: number }>({ text: 'SELECT count(*)::int n FROM outbox_messages WHERE case_id = $1', values: [caseId] });
    expect(rows[0]!.n).toBe(0);

    await store.unitOfWork((uow) => uow.transitionTask(b.token, { state: 'parked', parkReason: 'question', parkDetail: { questionId: 'q1' } }));
    expect(await loadTask(store.db, taskId)).toMatchObject({ state: 'parked', park_reason: 'question', park_detail: { questionId: 'q1' }, lease_owner: null });
  });

  it('concurrent ledger appends form one contiguous chain that verifies; tampering is detected', async () => {
    const { caseId } = await seedCase(store);
    await Promise.all(Array.from({ length: 30 }, (_, i) => store.unitOfWork((uow) => uow.appendLedger(caseId, { kind: 'note', body: { i } }))));
    const rows = await store.readLedger(caseId);
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    expect(new Set(rows.map((r) => (r.body as { i: number }).i)).size).toBe(30);
    expect(await store.verifyLedger(caseId)).toEqual({ ok: true, records: 30 });

    // The savepoint path: without a head row to lock, appends collide and retry from the new head.
    const legacy = newId();
    await db.query({ text: `INSERT INTO cases (id, case_type, origin_key, customer) VALUES ($1, 'legacy', $2, 'acme')`, values: [legacy, `legacy-${legacy}`] });
    await Promise.all(Array.from({ length: 5 }, () => store.unitOfWork((uow) => uow.appendLedger(legacy, { kind: 'note', body: {} }))));
    expect((await store.readLedger(legacy)).map((r) => r.seq)).toEqual([1, 2, 3, 4, 5]);
    expect((await store.verifyLedger(legacy)).ok).toBe(true);

    // The append-only triggers (migration 0006) are switched off as a superuser attacker would.
    await db.transaction(async (tx) => {
      await tx.query({ text: 'SET LOCAL session_replication_role = replica' });
      await tx.query({ text: `UPDATE ledger SET body = '{"i": 99}' WHERE case_id = $1 AND seq = 5`, values: [caseId] });
    });
    expect((await store.verifyLedger(caseId)).problem?.reason).toBe('hash_mismatch');
  });

  it('inbox: new, duplicate with the prior disposition, conflict on a different hash; concurrent duplicates', async () => {
    const id = newId();
    const row = (consumer: string, payloadHash: string) => ({ consumer, messageId: id, payloadHash, type: 'task.runnable', disposition: 'applied' as const });
    const first = await store.unitOfWorkOnInbox(row('turn-worker', AA), async (uow) => {
      await uow.setInboxDisposition('turn-worker', id, 'ignored');
      return 'ran';
    });
    expect(first).toEqual({ kind: 'new', value: 'ran' });
    // A redelivery's first statement carries its inbox row and fails with it: nothing it wrote stays.
    await store.db.query({ text: 'CREATE TABLE IF NOT EXISTS inbox_marks (message_id uuid NOT NULL)' });
    const mark = (uow: UnitOfWork) => uow.query({ name: 'test_inbox_mark', text: 'INSERT INTO inbox_marks (message_id) VALUES ($1::uuid)', values: [id] });
    expect(await store.unitOfWorkOnInbox(row('turn-worker', AA), mark)).toEqual({ kind: 'duplicate', disposition: 'ignored' });
    expect(await store.unitOfWorkOnInbox(row('turn-worker', BB), mark)).toEqual({ kind: 'conflict', storedHash: AA });
    expect((await store.db.query<{ n: number }>({ text: 'SELECT count(*)::int AS n FROM inbox_marks' })).rows[0]!.n).toBe(0);

    const other = newId();
    const results = await Promise.all(
      Array.from({ length: 8 }, () => store.unitOfWorkOnInbox({ consumer: 'gate', messageId: other, payloadHash: CC, type: 'gate.requested', disposition: 'applied' }, async () => 'ran')),
    );
    expect(results.filter((r) => r.kind === 'new')).toHaveLength(1);
    expect(results.filter((r) => r.kind === 'duplicate')).toHaveLength(7);
  });

  it('outbox: a committed enqueue wakes the listener, a rolled-back one does not; claim, release, mark', async () => {
    const { caseId } = await seedCase(store);
    let wakes = 0;
    const stop = await store.listenOutbox(() => wakes++);
    await eventually(() => wakes >= 1, { what: 'initial wake on subscribe' });
    await sleep(20);
    wakes = 0;

    await expect(
      store.unitOfWork(async (uow) => {
        await uow.enqueue({ id: newId(), type: 'task.runnable', caseId }, Buffer.from('rolled back'));
        throw new Error('handler failed');
      }),
    ).rejects.toThrow('handler failed');
    await sleep(100);
    expect(wakes).toBe(0);

    const body = Buffer.from([0, 1, 2, 250, 255]);
    const messageId = newId();
    await store.unitOfWork((uow) => uow.enqueue({ id: messageId, type: 'task.runnable', caseId }, body));
    await eventually(() => wakes >= 1, { what: 'wake after commit' });

    const claimed = await store.claimOutbox('relay-1', 10, 30_000);
    expect(claimed).toHaveLength(1);
    expect(claimed[0]).toMatchObject({ message_id: messageId, type: 'task.runnable', routing_key: 'task.runnable' });
    expect(Buffer.isBuffer(claimed[0]!.body)).toBe(true);
    expect(claimed[0]!.body.equals(body)).toBe(true);
    expect(typeof claimed[0]!.seq).toBe('number');
    expect(await store.claimOutbox('relay-2', 10, 30_000)).toEqual([]); // leased to relay-1

    await store.releaseOutbox([claimed[0]!.seq]);
    const again = await store.claimOutbox('relay-2', 10, 30_000);
    expect(again.map((r) => r.seq)).toEqual([claimed[0]!.seq]);
    expect((await store.outboxLag()).pending).toBe(1);
    await store.markPublished([claimed[0]!.seq]);
    expect(await store.outboxLag()).toEqual({ pending: 0, lagSeconds: 0 });
    expect(await store.claimOutbox('relay-3', 10, 1)).toEqual([]);
    await stop();
  });

  it('papers keep their bytes exactly (bytea ↔ Buffer)', async () => {
    const { caseId } = await seedCase(store);
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const { paperId } = await store.unitOfWork((uow) => uow.putPaper({ caseId, kind: 'artefact', name: 'blob', schemaId: 'raw.v1', bytes }));
    const read = await store.readPaper(paperId);
    expect(Buffer.isBuffer(read.bytes)).toBe(true);
    expect(read.bytes.equals(bytes)).toBe(true);
  });

  it('a plain query issued while a transaction is open elsewhere waits for it and never joins it', async () => {
    const { caseId } = await seedCase(store);
    const order: string[] = [];
    let inside!: () => void;
    const txStarted = new Promise<void>((r) => (inside = r));
    const tx = db.transaction(async (q) => {
      await q.query({ text: `INSERT INTO dead_letters (consumer, reason) VALUES ('tx', $1)`, values: [caseId] });
      inside();
      await sleep(150); // a real macrotask gap: other async paths get to run and submit work
      order.push('tx-end');
      throw new Error('roll the transaction back');
    });
    await txStarted;
    const plain = db.query({ text: `INSERT INTO dead_letters (consumer, reason) VALUES ('plain', $1)`, values: [caseId] }).then(() => order.push('plain'));
    await expect(tx).rejects.toThrow('roll the transaction back');
    await plain;
    expect(order).toEqual(['tx-end', 'plain']);
    const { rows } = await db.query<{ consumer: string }>({ text: 'SELECT consumer FROM dead_letters WHERE reason = $1', values: [caseId] });
    expect(rows.map((r) => r.consumer)).toEqual(['plain']); // survived the other path's ROLLBACK
  });

  it('refuses re-entry from inside its own transaction instead of deadlocking; a swallowed error cannot commit', async () => {
    await expect(db.transaction(() => db.query({ text: 'SELECT 1' }))).rejects.toBeInstanceOf(EmbeddedReentry);
    await expect(db.transaction(() => db.transaction(async () => 1))).rejects.toBeInstanceOf(EmbeddedReentry);

    const key = `swallow-${newId()}`;
    await expect(
      db.transaction(async (q) => {
        await q.query({ text: `INSERT INTO cases (id, case_type, origin_key, customer) VALUES ($1, 't', $2, 'c')`, values: [newId(), key] });
        await q.query({ text: 'SELECT 1/0' }).catch(() => undefined);
      }),
    ).rejects.toMatchObject({ code: '25P02' });
    const { rows } = await db.query<{ n: number }>({ text: 'SELECT count(*)::int n FROM cases WHERE origin_key = $1', values: [key] });
    expect(rows[0]!.n).toBe(0);
    await db.ping();
  }, 15_000); // a regression here deadlocks: fail fast instead of at the suite timeout

  it('keeps its data across close and reopen of the directory, refuses a second opener, takes over a stale lock', async () => {
    const { caseId, taskId } = await seedCase(store);
    await store.unitOfWork((uow) => uow.appendLedger(caseId, { kind: 'note', body: { kept: true } }));
    await expect(createPgliteDb(dataDir)).rejects.toBeInstanceOf(DataDirLocked);

    await db.close();
    await expect(db.query({ text: 'SELECT 1' })).rejects.toMatchObject({ code: 'database_unavailable' });
    // A crashed holder leaves its lock behind: a dead pid, or our own pid from a previous
    // incarnation (a restarted container is pid 1 every time). Neither may block the reopen.
    const deadPid = spawnSync(process.execPath, ['-e', '']).pid;
    writeFileSync(join(dataDir, 'everdict.lock'), String(deadPid));
    await open();
    await db.close();
    writeFileSync(join(dataDir, 'everdict.lock'), String(process.pid));
    await open();

    expect((await migrate(db)).applied).toEqual([]);
    expect((await loadTask(store.db, taskId))?.case_id).toBe(caseId);
    expect(await store.verifyLedger(caseId)).toEqual({ ok: true, records: 1 });
  });
});
