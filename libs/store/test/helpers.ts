import { freshDatabase } from '@everdict/testkit';
import { createPgDb } from '../src/pg.js';
import { migrate } from '../src/migrate.js';
import { Store } from '../src/store.js';
import type { StoreMetrics } from '../src/metrics.js';
import type { Db, Queryable, Sql } from '../src/db.js';

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
