/**
 * Statements sent together in one round trip (pgPipeline.ts) on real Postgres: `queryMany`, and
 * a lone parsed statement, with the unit of work's BEGIN when they open it. What must hold is that they behave exactly as
 * the same statements sent one by one — the same transaction, results in order, a failure that
 * stops the statements after it — in fewer round trips, and that the connection stays usable.
 * Round trips are counted at node-postgres' `Client.query`, a seam, not the thing under test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase } from '@everdict/testkit';
import { createPgDb } from '../src/pg.js';
import { DuplicateKey } from '../src/errors.js';
import type { Db, Sql } from '../src/db.js';
import { Store } from '../src/store.js';
import { roundTrips } from './helpers.js';

describe('statements sent together', () => {
  let db: Db;
  let store: Store;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const info = await freshDatabase('pg pipeline');
    drop = info.drop;
    // One connection: each unit of work below runs on the connection the ones before it used.
    db = createPgDb(info.url, { max: 1 });
    store = new Store(db);
    await db.query({ text: 'CREATE TABLE t (id int PRIMARY KEY, note text NOT NULL)' });
    await db.query({ text: 'CREATE SEQUENCE s' });
  });
  afterAll(async () => {
    await db.close();
    await drop();
  });

  const insert = (id: number, note = `n${id}`): Sql => ({ name: 'test_insert_t', text: 'INSERT INTO t (id, note) VALUES ($1::int, $2::text) RETURNING id', values: [id, note] });
  const count: Sql = { name: 'test_count_t', text: 'SELECT count(*)::int AS n FROM t WHERE id > $1::int', values: [0] };
  const nextval: Sql = { name: 'test_nextval', text: "SELECT nextval('s')::int AS v WHERE $1::int = 1", values: [1] };
  const rows = async (): Promise<number[]> => (await db.query<{ id: number }>({ text: 'SELECT id FROM t ORDER BY id' })).rows.map((r) => r.id);
  const sequence = async (): Promise<number> => (await db.query<{ v: number }>({ text: 'SELECT last_value::int AS v FROM s' })).rows[0]!.v;


  it('statements sent together that open a unit of work travel with its BEGIN once the connection has parsed them, inside the transaction', async () => {
    // First time on this connection: BEGIN, each statement (parsed now), COMMIT.
    const first = await roundTrips(() => store.unitOfWork((uow) => uow.queryMany([insert(1), count])));
    expect(first.trips).toBe(4);
    // Parsed: BEGIN and both statements in one round trip, then COMMIT.
    const second = await roundTrips(() => store.unitOfWork((uow) => uow.queryMany([insert(2), count])));
    expect(second.trips).toBe(2);
    expect(second.value.map((r) => r.rows)).toEqual([[{ id: 2 }], [{ n: 2 }]]);
    // In the transaction: a unit of work that fails after them leaves nothing.
    await expect(
      store.unitOfWork(async (uow) => {
        await uow.queryMany([insert(3), count]);
        throw new Error('handler failed');
      }),
    ).rejects.toThrow('handler failed');
    expect(await rows()).toEqual([1, 2]);
  });

  it('queryMany runs its statements in order, in one round trip, and returns each one’s result', async () => {
    await store.unitOfWork((uow) => uow.queryMany([insert(10), nextval])); // parses nextval here
    const before = await sequence();
    const { value, trips } = await roundTrips(() => store.unitOfWork((uow) => uow.queryMany([insert(11), count, insert(12), count, nextval])));
    expect(trips).toBe(2); // BEGIN with the five statements, COMMIT
    expect(value.map((r) => r.rows)).toEqual([[{ id: 11 }], [{ n: 4 }], [{ id: 12 }], [{ n: 5 }], [{ v: before + 1 }]]);
    expect(value.map((r) => r.rowCount)).toEqual([1, 1, 1, 1, 1]);
  });

  it('a failing statement rejects the call with its own error; the statements after it do not run; the connection goes on', async () => {
    const before = await sequence();
    const kept = await rows();
    // A sequence is not transactional: had nextval run after the failure, the rollback would not undo it.
    await expect(store.unitOfWork((uow) => uow.queryMany([insert(20), insert(11), nextval]))).rejects.toBeInstanceOf(DuplicateKey);
    expect(await sequence()).toBe(before);
    expect(await rows()).toEqual(kept);
    // Inside an open transaction too, and the transaction is then rolled back as after any failure.
    await expect(
      store.unitOfWork(async (uow) => {
        await uow.query(insert(21));
        await uow.queryMany([insert(22), insert(11), nextval]);
      }),
    ).rejects.toBeInstanceOf(DuplicateKey);
    expect(await sequence()).toBe(before);
    expect(await rows()).toEqual(kept);
    // The same connection (and its parsed statements) goes on in one round trip.
    const { value, trips } = await roundTrips(() => store.unitOfWork((uow) => uow.queryMany([insert(23), nextval])));
    expect(trips).toBe(2);
    expect(value.map((r) => r.rows)).toEqual([[{ id: 23 }], [{ v: before + 1 }]]);
  });

  it('a value that cannot be sent fails the call before anything is sent, and the connection goes on', async () => {
    const circular: Record<string, unknown> = {};
    circular['self'] = circular;
    const kept = await rows();
    await expect(store.unitOfWork((uow) => uow.queryMany([insert(30), { name: 'test_json', text: 'SELECT $1::jsonb AS j', values: [circular] }]))).rejects.toThrow(/circular/i);
    expect(await rows()).toEqual(kept);
    const { value } = await roundTrips(() => store.unitOfWork((uow) => uow.queryMany([insert(31), count])));
    expect(value[0]!.rows).toEqual([{ id: 31 }]);
  });

  it('commitWith sends the last statements with the COMMIT: one round trip, and the unit of work ends there', async () => {
    await store.unitOfWork((uow) => uow.commitWith([insert(40), nextval])); // parsed here: one by one, COMMIT after
    const { value, trips } = await roundTrips(() =>
      store.unitOfWork(async (uow) => {
        const [a] = await uow.queryMany([insert(41)]);
        const [b, c] = await uow.commitWith([insert(42), count]);
        await expect(uow.query(count)).rejects.toThrow(/has committed/);
        return [a!.rows, b!.rows, c!.rows];
      }),
    );
    expect(trips).toBe(2); // BEGIN with the first, then the last two with COMMIT; no COMMIT after
    expect(value[1]).toEqual([{ id: 42 }]);
    expect(await rows()).toEqual(expect.arrayContaining([40, 41, 42]));
  });

  it('commitWith commits nothing when one of its statements fails, nor after a failure the callback swallowed', async () => {
    const kept = await rows();
    await expect(
      store.unitOfWork(async (uow) => {
        await uow.queryMany([insert(50)]);
        await uow.commitWith([insert(51), insert(11)]);
      }),
    ).rejects.toBeInstanceOf(DuplicateKey);
    expect(await rows()).toEqual(kept);
    await expect(
      store.unitOfWork(async (uow) => {
        await uow.queryMany([insert(52)]);
        await uow.queryMany([insert(11)]).catch(() => undefined);
        await uow.commitWith([count]);
      }),
    ).rejects.toThrow();
    expect(await rows()).toEqual(kept);
  });

  it('statements the simple protocol must run (no parameters, no name) are sent one by one, as before', async () => {
    const { value, trips } = await roundTrips(() =>
      store.unitOfWork((uow) => uow.queryMany([{ text: "SET LOCAL application_name = 'a'; SET LOCAL application_name = 'b'" }, { text: 'SELECT current_setting($1::text) AS v', values: ['application_name'] }])),
    );
    expect(trips).toBe(3); // BEGIN with the first (simple protocol), the second, COMMIT
    expect(value[1]!.rows).toEqual([{ v: 'b' }]);
  });

  it('a lone first statement travels with BEGIN once the connection has parsed it; its failure rolls the unit of work back', async () => {
    const lone = (id: number): Sql => ({ name: 'test_lone_insert_t', text: 'INSERT INTO t (id, note) VALUES ($1::int, $2::text) RETURNING id, note', values: [id, `lone ${id}`] });
    // First time on this connection: BEGIN, then the statement (parsed now), then COMMIT.
    expect((await roundTrips(() => store.unitOfWork((uow) => uow.query(lone(50))))).trips).toBe(3);
    const { value, trips } = await roundTrips(() => store.unitOfWork((uow) => uow.query(lone(51))));
    expect(trips).toBe(2); // BEGIN with the statement, COMMIT
    expect(value.rows).toEqual([{ id: 51, note: 'lone 51' }]);
    const kept = await rows();
    // In the transaction: a later failure leaves nothing of it.
    await expect(
      store.unitOfWork(async (uow) => {
        await uow.query(lone(52));
        throw new Error('handler failed');
      }),
    ).rejects.toThrow('handler failed');
    // Its own failure is its typed error, and the statements after it never run.
    const before = await sequence();
    await expect(
      store.unitOfWork(async (uow) => {
        await uow.query(lone(51));
        await uow.query(nextval);
      }),
    ).rejects.toBeInstanceOf(DuplicateKey);
    expect(await sequence()).toBe(before);
    expect(await rows()).toEqual(kept);
    // The connection goes on, still in one round trip with BEGIN.
    expect((await roundTrips(() => store.unitOfWork((uow) => uow.query(lone(53))))).trips).toBe(2);
    expect(await rows()).toEqual([...kept, 53]);
  });
});
