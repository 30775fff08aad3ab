/** `everdict migrate`: apply pending migrations to DATABASE_URL under the advisory lock. */
import { createPgDb, migrate } from '@everdict/store';
import { emit } from './output.js';

export async function runMigrate(opts: { databaseUrl: string; json: boolean }): Promise<void> {
  const db = createPgDb(opts.databaseUrl, { max: 1, applicationName: 'everdict-migrate' });
  try {
    const result = await migrate(db);
    emit(opts.json, result, () =>
      result.applied.length ? `applied ${result.applied.join(', ')}; schema at ${result.current}` : `schema up to date at ${result.current}`,
    );
  } finally {
    await db.close();
  }
}
