/**
 * A node that may not migrate (the services' role) waits for the schema: through the window in
 * which `everdict migrate --grant-to` has committed the migrations but not yet the grants, its
 * reads of the schema's records are denied — it keeps waiting, says why, and starts once the
 * grants land. Real Postgres; the role is a real LOGIN role of its own.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { TEST_DATABASE_URL, eventually, freshDatabase } from '@everdict/testkit';
import { createPgDb } from '../src/pg.js';
import type { Db } from '../src/db.js';
import { NOT_GRANTED, ensureSchema, grantAppRole, migrate } from '../src/migrate.js';

const ROLE = `ev_wait_${process.pid}_${randomBytes(3).toString('hex')}`;

async function admin(text: string): Promise<void> {
  const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await c.connect();
  try {
    await c.query(text);
  } finally {
    await c.end();
  }
}

describe('ensureSchema as the services role', () => {
  const open: Db[] = [];
  afterAll(async () => {
    await open[0]?.query({ text: `DROP OWNED BY ${ROLE}` }).catch(() => {});
    for (const db of open.reverse()) await db.close();
    await admin(`DROP ROLE IF EXISTS ${ROLE}`);
  });

  it('waits while the migrated schema is not granted to it yet, then starts', async () => {
    const { url } = await freshDatabase('ensure_schema');
    const owner = createPgDb(url, { max: 2 });
    open.push(owner);
    await admin(`CREATE ROLE ${ROLE} LOGIN`);
    // The migrations are committed; the grants are not (yet).
    await migrate(owner);
    const appUrl = new URL(url);
    appUrl.username = ROLE;
    const app = createPgDb(appUrl.toString(), { max: 2 });
    open.push(app);

    const heard: string[] = [];
    let started = false;
    const waiting = ensureSchema(app, { migrateOnStart: false, pollMs: 25, onBehind: (m) => heard.push(m) }).then(() => {
      started = true;
    });
    await eventually(() => heard.includes(NOT_GRANTED), { what: 'the not-granted reason' });
    await new Promise((r) => setTimeout(r, 100));
    expect(started).toBe(false);
    // Said once per wait, not once per poll.
    expect(heard.filter((m) => m === NOT_GRANTED)).toHaveLength(1);

    await grantAppRole(owner, ROLE);
    await waiting;
    expect(started).toBe(true);
  });
});
