import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { freshDatabase } from '@everdict/testkit';
import type { Db } from '../src/db.js';
import { ConstraintViolation } from '../src/errors.js';
import { migrate } from '../src/migrate.js';
import { createPgDb } from '../src/pg.js';
import { Store } from '../src/store.js';
import type { InboxRow } from '../src/store.js';
import type { UnitOfWork } from '../src/unitOfWork.js';
import { recording } from './helpers.js';
import type { Logged } from './helpers.js';

const HASH = `sha256:${'cd'.repeat(32)}`;
const OTHER = `sha256:${'ef'.repeat(32)}`;

/** A delivery consumed alone: the store's unit of work on its inbox row (Store.unitOfWorkOnInbox). */
describe('a delivery inbox row rides with its unit of work first statement', () => {
  let raw: Db;
  let log: Logged[];
  let store: Store;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const info = await freshDatabase('inbox carry');
    raw = createPgDb(info.url, { max: 4 });
    await migrate(raw);
    await raw.query({ text: 'CREATE TABLE carry_counters (id uuid PRIMARY KEY, n int NOT NULL DEFAULT 0 CHECK (n < 100))' });
    await raw.query({ text: 'CREATE TABLE carry_effects (message_id uuid PRIMARY KEY)' });
    const rec = recording(raw);
    log = rec.log;
    store = new Store(rec.db);
    drop = info.drop;
  });
  afterAll(async () => {
    await raw.close();
    await drop();
  });

  const row = (messageId: string, payloadHash = HASH): InboxRow => ({ consumer: 'turn-worker', messageId, payloadHash, type: 'task.runnable', disposition: 'applied' });
  const counter = async (): Promise<string> => {
    const id = newId();
    await raw.query({ text: 'INSERT INTO carry_counters (id) VALUES ($1::uuid)', values: [id] });
    return id;
  };
  const bump = (uow: UnitOfWork, id: string, by = 1) => uow.query<{ n: number }>({ name: 'test_carry_bump', text: 'UPDATE carry_counters SET n = n + $2::int WHERE id = $1::uuid RETURNING n', values: [id, by] });
  const count = async (id: string) => (await raw.query<{ n: number }>({ text: 'SELECT n FROM carry_counters WHERE id = $1::uuid', values: [id] })).rows[0]!.n;
  const recorded = async (messageId: string) =>
    (await raw.query<{ payload_hash: string; disposition: string }>({ text: 'SELECT payload_hash, disposition FROM inbox_messages WHERE message_id = $1::uuid', values: [messageId] })).rows;
  /** The statements the last `n` transactions sent, each transaction's texts in order. */
  const lastTransactions = (n: number): string[][] => {
    const ids = [...new Set(log.filter((l) => typeof l.tx === 'number').map((l) => l.tx))].slice(-n);
    return ids.map((id) => log.filter((l) => l.tx === id).map((l) => l.text));
  };

  it('a named first statement carries the row: one statement, the handler gets its own result', async () => {
    const id = await counter();
    const messageId = newId();
    const done = await store.unitOfWorkOnInbox(row(messageId), async (uow) => (await bump(uow, id, 5)).rows);
    expect(done).toEqual({ kind: 'new', value: [{ n: 5 }] });
    expect(await recorded(messageId)).toEqual([{ payload_hash: HASH, disposition: 'applied' }]);
    const [statements] = lastTransactions(1);
    expect(statements).toHaveLength(1);
    expect(statements![0]).toMatch(/^WITH ev_inbox AS \(INSERT INTO inbox_messages/);
  });

  it('a redelivery settles as a duplicate, another payload as a conflict, and the statement that carried it left nothing', async () => {
    const id = await counter();
    const messageId = newId();
    expect((await store.unitOfWorkOnInbox(row(messageId), (uow) => bump(uow, id))).kind).toBe('new');
    expect(await store.unitOfWorkOnInbox(row(messageId), (uow) => bump(uow, id))).toEqual({ kind: 'duplicate', disposition: 'applied' });
    expect(await store.unitOfWorkOnInbox(row(messageId, OTHER), (uow) => bump(uow, id))).toEqual({ kind: 'conflict', storedHash: HASH });
    expect(await count(id)).toBe(1);
  });

  it('a redelivery whose statement fails on a key of its own first (the effect is in) is a duplicate, not that key violation', async () => {
    const messageId = newId();
    const effect = (uow: UnitOfWork) => uow.query({ name: 'test_carry_effect', text: 'INSERT INTO carry_effects (message_id) VALUES ($1::uuid)', values: [messageId] });
    expect((await store.unitOfWorkOnInbox(row(messageId), effect)).kind).toBe('new');
    expect(await store.unitOfWorkOnInbox(row(messageId), effect)).toEqual({ kind: 'duplicate', disposition: 'applied' });
    expect(await store.unitOfWorkOnInbox(row(messageId, OTHER), effect)).toEqual({ kind: 'conflict', storedHash: HASH });
  });

  it('a handler that swallows the failure of the statement that carried the row still settles as a duplicate', async () => {
    const id = await counter();
    const messageId = newId();
    await store.unitOfWorkOnInbox(row(messageId), (uow) => bump(uow, id));
    let swallowed = 0;
    const done = await store.unitOfWorkOnInbox(row(messageId), async (uow) => {
      await bump(uow, id).catch(() => void swallowed++);
      return 'carried on';
    });
    expect(swallowed).toBe(1);
    expect(done).toEqual({ kind: 'duplicate', disposition: 'applied' });
    expect(await count(id)).toBe(1);
  });

  it('a failure of the carrying statement that is not about the inbox is the unit of work own: it rolls back and nothing is recorded', async () => {
    const id = await counter();
    const messageId = newId();
    await expect(store.unitOfWorkOnInbox(row(messageId), (uow) => bump(uow, id, 100))).rejects.toBeInstanceOf(ConstraintViolation);
    expect(await recorded(messageId)).toEqual([]);
    // The delivery, consumed again, is new.
    expect((await store.unitOfWorkOnInbox(row(messageId), (uow) => bump(uow, id))).kind).toBe('new');
  });

  it('a first statement that cannot carry it, several statements at once, or none: the row goes alone, first', async () => {
    const id = await counter();
    const unnamed = newId();
    await store.unitOfWorkOnInbox(row(unnamed), (uow) => uow.query({ text: 'UPDATE carry_counters SET n = n + 1 WHERE id = $1::uuid', values: [id] }));
    const many = newId();
    await store.unitOfWorkOnInbox(row(many), async (uow) => {
      await bump(uow, id); // parsed on some connection; the pipeline below may or may not take it
      return uow.queryMany([{ name: 'test_carry_bump', text: 'UPDATE carry_counters SET n = n + $2::int WHERE id = $1::uuid RETURNING n', values: [id, 1] }]);
    });
    const none = newId();
    expect(await store.unitOfWorkOnInbox(row(none), async () => 'no statement')).toEqual({ kind: 'new', value: 'no statement' });
    const [first, , third] = lastTransactions(3);
    expect(first![0]).toMatch(/^INSERT INTO inbox_messages|^EXECUTE ev_inbox_insert/);
    expect(first![1]).toMatch(/^UPDATE carry_counters/);
    expect(third).toHaveLength(1);
    expect(third![0]).toMatch(/^INSERT INTO inbox_messages|^EXECUTE ev_inbox_insert/);
    for (const m of [unnamed, many, none]) expect(await recorded(m)).toHaveLength(1);
    expect(await count(id)).toBe(3);
    expect(await store.unitOfWorkOnInbox(row(none), async () => 'no statement')).toEqual({ kind: 'duplicate', disposition: 'applied' });
  });

  it('a first statement on the inbox itself sees the row: it goes alone ahead (an ignored delivery keeps its disposition)', async () => {
    const messageId = newId();
    const ignore = (uow: UnitOfWork) => uow.setInboxDisposition('turn-worker', messageId, 'ignored');
    expect((await store.unitOfWorkOnInbox(row(messageId), ignore)).kind).toBe('new');
    expect(await recorded(messageId)).toEqual([{ payload_hash: HASH, disposition: 'ignored' }]);
    expect(await store.unitOfWorkOnInbox(row(messageId), ignore)).toEqual({ kind: 'duplicate', disposition: 'ignored' });
  });

  it('concurrent copies of one delivery: exactly one applies, the others wait for it and settle as duplicates', async () => {
    const id = await counter();
    const messageId = newId();
    const results = await Promise.all(Array.from({ length: 6 }, () => store.unitOfWorkOnInbox(row(messageId), (uow) => bump(uow, id))));
    expect(results.filter((r) => r.kind === 'new')).toHaveLength(1);
    expect(results.filter((r) => r.kind === 'duplicate')).toHaveLength(5);
    expect(await count(id)).toBe(1);
  });

  it('a locking read and a statement with its own WITH carry it too', async () => {
    const id = await counter();
    const locked = newId();
    const read = await store.unitOfWorkOnInbox(row(locked), async (uow) => (await uow.query<{ n: number }>({ name: 'test_carry_lock', text: 'SELECT n FROM carry_counters WHERE id = $1::uuid FOR UPDATE', values: [id] })).rows);
    expect(read).toEqual({ kind: 'new', value: [{ n: 0 }] });
    const withed = newId();
    const sum = await store.unitOfWorkOnInbox(row(withed), async (uow) => (await uow.query<{ s: number }>({ name: 'test_carry_with', text: 'WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r WHERE x < $1::int) SELECT sum(x)::int AS s FROM r', values: [4] })).rows);
    expect(sum).toEqual({ kind: 'new', value: [{ s: 10 }] });
    for (const m of [locked, withed]) expect(await recorded(m)).toHaveLength(1);
    for (const [statement] of lastTransactions(2)) expect(statement).toMatch(/^WITH( RECURSIVE)? ev_inbox AS/);
  });
});
