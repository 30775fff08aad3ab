/**
 * A unit of work whose connection dies (as on a Postgres restart: the backend is terminated with
 * 57P01 `terminating connection due to administrator command`) rejects with the retryable
 * `database_unavailable` — whether a statement was in flight or the transaction sat idle — and
 * the dying client's 'error' event never escapes (unhandled, it would crash the process). The
 * pool recovers: the next unit of work runs. Only this test's own backends are terminated.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase } from '@everdict/testkit';
import { createPgDb } from '../src/index.js';
import type { Db } from '../src/index.js';

let db: Db;
let admin: pg.Client;
let drop: () => Promise<void>;
const escaped: unknown[] = [];
const onEscape = (err: unknown) => escaped.push(err);

beforeAll(async () => {
  const d = await freshDatabase('store_lost_conn');
  drop = d.drop;
  db = createPgDb(d.url, { max: 2 });
  admin = new pg.Client({ connectionString: d.url });
  await admin.connect();
  process.on('uncaughtException', onEscape);
});
afterAll(async () => {
  process.off('uncaughtException', onEscape);
  await admin?.end();
  await db?.close();
  await drop?.();
});

const terminate = (pid: number) => admin.query('SELECT pg_terminate_backend($1)', [pid]);
const backendPid = async (tx: { query: Db['query'] }) => (await tx.query<{ pid: number }>({ text: 'SELECT pg_backend_pid() AS pid', values: [] })).rows[0]!.pid;

describe('a unit of work losing its connection', () => {
  it('idle in transaction: the next statement rejects database_unavailable, retryable', async () => {
    const run = db.transaction(async (tx) => {
      const pid = await backendPid(tx);
      await terminate(pid);
      await new Promise((r) => setTimeout(r, 300)); // the 'error' event arrives while we wait
      await tx.query({ text: 'SELECT 1' });
    });
    await expect(run).rejects.toMatchObject({ code: 'database_unavailable', retryable: true });
  });

  it('a statement in flight: it rejects database_unavailable, and COMMIT is never reported as success', async () => {
    const run = db.transaction(async (tx) => {
      const pid = await backendPid(tx);
      setTimeout(() => void terminate(pid), 200);
      await tx.query({ text: 'SELECT pg_sleep(5)' });
    });
    await expect(run).rejects.toMatchObject({ code: 'database_unavailable', retryable: true });
  });

  it('a callback that swallows the failure still does not commit', async () => {
    const run = db.transaction(async (tx) => {
      const pid = await backendPid(tx);
      await terminate(pid);
      await new Promise((r) => setTimeout(r, 300));
      await tx.query({ text: 'SELECT 1' }).catch(() => undefined);
      return 'looks fine';
    });
    await expect(run).rejects.toMatchObject({ code: 'database_unavailable' });
  });

  it('nothing escaped as an uncaught error, and the pool serves the next unit of work', async () => {
    expect(escaped).toEqual([]);
    await expect(db.transaction(async (tx) => (await tx.query<{ one: number }>({ text: 'SELECT 1 AS one', values: [] })).rows[0]!.one)).resolves.toBe(1);
  });
});
