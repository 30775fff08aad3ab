import { vi } from 'vitest';
import pg from 'pg';
import { freshDatabase } from '@everdict/testkit';
import { createPgDb } from '../src/pg.js';
import { migrate } from '../src/migrate.js';
import { Store } from '../src/store.js';
import type { StoreMetrics } from '../src/metrics.js';
import type { Db, Queryable, Sql } from '../src/db.js';
import type { TurnWrite } from '../src/journal.js';

export interface TestStore {
  store: Store;
  url: string;
  staleFences: string[];
  close(): Promise<void>;
}

/** A migrated store on its own database, with a metrics sink that records stale fences. */
export async function testStore(label: string, poolMax = 10): Promise<TestStore> {
  const dbInfo = await freshDatabase(label);
  const db = createPgDb(dbInfo.url, { max: poolMax });
  await migrate(db);
  const staleFences: string[] = [];
  const metrics: StoreMetrics = { staleFence: (op) => staleFences.push(op), transaction: () => {} };
  return { store: new Store(db, { metrics }), url: dbInfo.url, staleFences, close: () => db.close() };
}

/**
 * A migrated store on its own database over ONE connection: a unit of work runs on the
 * connection the ones before it used (their statements parsed there), so round trips can be
 * counted. `drop` removes the database once the store is closed.
 */
export async function oneConnectionStore(label: string): Promise<{ db: Db; store: Store; drop(): Promise<void> }> {
  const info = await freshDatabase(label);
  const db = createPgDb(info.url, { max: 1 });
  await migrate(db);
  return { db, store: new Store(db), drop: info.drop };
}

/** A task's finish: its turn record and `done`, nothing else. */
export const finishWrite: TurnWrite = {
  papers: [],
  completions: [],
  intents: [],
  checkpoint: null,
  ledger: { kind: 'turn', body: { outcome: 'done' } },
  transition: { state: 'done', parkReason: null, parkDetail: null, wakeAfterMs: null },
};

export async function seedCase(store: Store, originKey = `origin-${Math.random()}`): Promise<{ caseId: string; taskId: string }> {
  return store.unitOfWork(async (uow) => {
    const { caseId } = await uow.openCase({ caseType: 'test', originKey, customer: 'acme' });
    const taskId = await uow.createTask({ caseId, profile: 'root' });
    return { caseId, taskId };
  });
}

export interface Logged {
  /** The transaction it ran in (null: a statement of its own; 'deferred': through queryDeferred). */
  readonly tx: number | null | 'deferred';
  readonly text: string;
  readonly name: string | undefined;
  readonly values: readonly unknown[] | undefined;
}

/** The statements a Db runs, in order, with the transaction each ran in (a seam for tests, not the thing under test). */
export function recording(inner: Db): { db: Db; log: Logged[] } {
  const log: Logged[] = [];
  let txs = 0;
  const db: Db = {
    query: (q: Sql) => {
      log.push({ tx: null, text: q.text, name: q.name, values: q.values });
      return inner.query(q);
    },
    queryDeferred: (q: Sql) => {
      log.push({ tx: 'deferred', text: q.text, name: q.name, values: q.values });
      return inner.queryDeferred(q);
    },
    transaction: (fn) =>
      inner.transaction((tx) => {
        const id = ++txs;
        const q: Queryable = {
          query: (s: Sql) => {
            log.push({ tx: id, text: s.text, name: s.name, values: s.values });
            return tx.query(s);
          },
          queryMany: async (ss: readonly Sql[]) => {
            for (const s of ss) log.push({ tx: id, text: s.text, name: s.name, values: s.values });
            if (tx.queryMany) return tx.queryMany(ss);
            const out = [];
            for (const s of ss) out.push(await tx.query(s));
            return out;
          },
        };
        return fn(q);
      }),
    listen: (c, f) => inner.listen(c, f),
    ping: () => inner.ping(),
    close: () => inner.close(),
  };
  return { db, log };
}

/** A value as an SQL literal for EXECUTE (which takes no bind parameters): bytea, array or text. */
function literal(v: unknown): string {
  if (Buffer.isBuffer(v)) return `'\\x${v.toString('hex')}'`;
  const text = Array.isArray(v) ? `{${v.join(',')}}` : String(v);
  return `'${text.replace(/'/g, "''")}'`;
}

/**
 * The GENERIC plan of `sql` (the plan a prepared statement keeps for the life of its connection),
 * its parameters of `types`, as EXPLAIN prints it.
 */
export function genericPlan(db: Db, sql: Sql, types: readonly string[]): Promise<string> {
  return db.transaction(async (tx) => {
    await tx.query({ text: `PREPARE ev_plan_probe (${types.join(', ')}) AS ${sql.text}` });
    await tx.query({ text: 'SET LOCAL plan_cache_mode = force_generic_plan' });
    const { rows } = await tx.query<{ 'QUERY PLAN': string }>({ text: `EXPLAIN EXECUTE ev_plan_probe(${(sql.values ?? []).map(literal).join(', ')})` });
    await tx.query({ text: 'DEALLOCATE ev_plan_probe' });
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  });
}

/**
 * Runs `fn` and counts node-postgres' `Client.query` calls meanwhile: one per round trip (a
 * pipeline is one). A seam for tests, not the thing under test.
 */
export async function roundTrips<T>(fn: () => Promise<T>): Promise<{ value: T; trips: number }> {
  const spy = vi.spyOn(pg.Client.prototype, 'query');
  try {
    const value = await fn();
    return { value, trips: spy.mock.calls.length };
  } finally {
    spy.mockRestore();
  }
}
