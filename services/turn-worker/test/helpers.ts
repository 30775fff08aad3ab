/** A migrated store on a database of the test file's own, with a sink that records stale fences. */
import { Store, claimTask, createPgDb, migrate } from '@everdict/store';
import type { FenceToken } from '@everdict/store';
import { freshDatabase } from '@everdict/testkit';

export interface Fixture {
  store: Store;
  staleFences: string[];
  close(): Promise<void>;
}

export async function storeFixture(label: string): Promise<Fixture> {
  const info = await freshDatabase(label);
  const db = createPgDb(info.url, { max: 8 });
  await migrate(db);
  const staleFences: string[] = [];
  return { store: new Store(db, { metrics: { staleFence: (op) => staleFences.push(op), transaction: () => {} } }), staleFences, close: () => db.close() };
}

export async function seedTask(store: Store, profile = 'agent'): Promise<{ caseId: string; taskId: string }> {
  return store.unitOfWork(async (uow) => {
    const { caseId } = await uow.openCase({ caseType: 'ticket', originKey: `o-${Math.random()}`, customer: 'acme' });
    return { caseId, taskId: await uow.createTask({ caseId, profile }) };
  });
}

export async function claim(store: Store, taskId: string, owner = 'w1', ttlMs = 30_000): Promise<FenceToken> {
  const c = await claimTask(store.db, taskId, owner, ttlMs);
  if (!c.claimed) throw new Error(`claim failed: ${c.reason}`);
  return c.token;
}
