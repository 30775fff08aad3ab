/**
 * Issue 12 items 6 and 7, in the database itself: the ledger refuses UPDATE, DELETE and
 * TRUNCATE for every role (migration 0006), and the services' role (`grantAppRole`) writes rows
 * but cannot alter the schema. Real Postgres; the app role is a real LOGIN role of its own.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_DATABASE_URL, freshDatabase } from '@everdict/testkit';
import { createPgDb } from '../src/pg.js';
import type { Db } from '../src/db.js';
import { MigrationError } from '../src/errors.js';
import { grantAppRole, migrate, schemaStatus } from '../src/migrate.js';
import { Store } from '../src/store.js';
import { seedCase } from './helpers.js';

const ROLE = `ev_app_${process.pid}_${randomBytes(3).toString('hex')}`;
const noMetrics = { staleFence: () => {}, transaction: () => {} };

async function refusal(db: Db, text: string): Promise<{ code?: string; message: string }> {
  try {
    await db.query({ text });
  } catch (err) {
    return { code: (err as { code?: string }).code, message: (err as Error).message };
  }
  throw new Error(`expected ${text} to be refused`);
}

describe('ledger append-only and the services role', () => {
  let url: string;
  let owner: Db;
  let app: Db;
  let ownerStore: Store;
  let appStore: Store;
  let caseId: string;

  beforeAll(async () => {
    const fresh = await freshDatabase('append_only_roles');
    url = fresh.url;
    owner = createPgDb(url, { max: 4 });
    await migrate(owner);
    await grantAppRole(owner, ROLE, { password: 'app-password-1' });
    const appUrl = new URL(url);
    appUrl.username = ROLE;
    appUrl.password = 'app-password-1';
    app = createPgDb(appUrl.toString(), { max: 4 });
    ownerStore = new Store(owner, { metrics: noMetrics });
    appStore = new Store(app, { metrics: noMetrics });
    ({ caseId } = await seedCase(appStore));
    for (let i = 0; i < 3; i++) await appStore.unitOfWork((uow) => uow.appendLedger(caseId, { kind: 'note', body: { i } }));
  });

  afterAll(async () => {
    await app?.close();
    await owner?.query({ text: `DROP OWNED BY ${ROLE}` }).catch(() => {});
    await owner?.close();
    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    try {
      await admin.query(`DROP ROLE IF EXISTS ${ROLE}`);
    } finally {
      await admin.end();
    }
  });

  it('UPDATE, DELETE and TRUNCATE of ledger rows fail with a clear error, even for the owner', async () => {
    for (const text of [
      `UPDATE ledger SET body = '{"i": 99}' WHERE case_id = '${caseId}' AND seq = 2`,
      `DELETE FROM ledger WHERE case_id = '${caseId}' AND seq = 3`,
      'TRUNCATE ledger CASCADE',
    ]) {
      const r = await refusal(owner, text);
      expect(r.code).toBe('42501');
      expect(r.message).toMatch(/^ledger is append-only: (UPDATE|DELETE|TRUNCATE) refused$/);
    }
    expect(await ownerStore.verifyLedger(caseId)).toEqual({ ok: true, records: 3 });
  });

  it('the services role lacks UPDATE and DELETE on ledger, and appends and verifies as before', async () => {
    for (const text of [`UPDATE ledger SET kind = 'x' WHERE case_id = '${caseId}'`, `DELETE FROM ledger WHERE case_id = '${caseId}'`]) {
      const r = await refusal(app, text);
      expect(r.code).toBe('42501');
      expect(r.message).toMatch(/permission denied for table ledger/);
    }
    // ledger_heads moves with every append: it stays writable.
    await appStore.unitOfWork((uow) => uow.appendLedger(caseId, { kind: 'note', body: { i: 3 } }));
    const { rows } = await app.query<{ seq: number }>({ text: 'SELECT seq FROM ledger_heads WHERE case_id = $1', values: [caseId] });
    expect(rows[0]?.seq).toBe(4);
    expect(await appStore.verifyLedger(caseId)).toEqual({ ok: true, records: 4 });
  });

  it('the services role cannot alter the schema: CREATE, ALTER, DROP and trigger changes are denied', async () => {
    for (const text of [
      'CREATE TABLE intruder (x int)',
      'ALTER TABLE tasks ADD COLUMN intruder int',
      'ALTER TABLE ledger DISABLE TRIGGER ledger_no_update_delete',
      'DROP TABLE dead_letters',
      'CREATE SCHEMA intruder',
      `INSERT INTO schema_migrations (version, name, checksum) VALUES (999, 'x', 'x')`,
    ]) {
      const r = await refusal(app, text);
      expect(r.code, text).toBe('42501');
    }
    // …and, asked at start, it knows it may not migrate, while the schema reads as current.
    const status = await schemaStatus(app);
    expect(status).toMatchObject({ pending: [], canMigrate: false });
    expect(status.current).toBe(status.required);
    expect((await schemaStatus(owner)).canMigrate).toBe(true);
  });

  it('re-granting rotates the password; the owner itself and odd names are refused', async () => {
    expect(await grantAppRole(owner, ROLE, { password: 'app-password-2' })).toEqual({ created: false });
    const { rows } = await owner.query<{ n: number }>({ text: `SELECT count(*)::int AS n FROM pg_roles WHERE rolname = $1 AND rolcanlogin`, values: [ROLE] });
    expect(rows[0]?.n).toBe(1);
    await expect(grantAppRole(owner, 'postgres')).rejects.toThrow(/must differ from the schema owner/);
    await expect(grantAppRole(owner, 'Bad"Name')).rejects.toBeInstanceOf(MigrationError);
    await expect(grantAppRole(owner, `ev_missing_${process.pid}`)).rejects.toThrow(/does not exist/);
  });
});
