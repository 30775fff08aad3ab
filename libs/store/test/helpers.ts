import { freshDatabase } from '@everdict/testkit';
import { createPgDb } from '../src/pg.js';
import { migrate } from '../src/migrate.js';
import { Store } from '../src/store.js';
import type { StoreMetrics } from '../src/metrics.js';

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
