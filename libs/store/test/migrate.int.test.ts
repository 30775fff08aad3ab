import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CALL_STATUSES, PARK_REASONS, TASK_STATES } from '@everdict/contracts';
import { freshDatabase } from '@everdict/testkit';
import { createPgDb } from '../src/pg.js';
import { loadMigrations, migrate } from '../src/migrate.js';
import type { Db } from '../src/db.js';

describe('migrations', () => {
  let db: Db;
  beforeAll(async () => {
    db = createPgDb((await freshDatabase('migrate')).url, { max: 8 });
  });
  afterAll(async () => db.close());

  it('applies every file once even when many migrators start together', async () => {
    const results = await Promise.all(Array.from({ length: 6 }, () => migrate(db)));
    const applied = results.flatMap((r) => r.applied);
    expect(applied).toEqual(loadMigrations().map((m) => m.name));
    const again = await migrate(db);
    expect(again.applied).toEqual([]);
    const { rows } = await db.query<{ n: number }>({ text: 'SELECT count(*)::int AS n FROM schema_migrations' });
    expect(rows[0]!.n).toBe(loadMigrations().length);
  });

  it('renders CHECK constraints from the same constants the code uses', async () => {
    const check = async (table: string, column: string) => {
      const { rows } = await db.query<{ def: string }>({
        text: `SELECT pg_get_constraintdef(c.oid) AS def FROM pg_constraint c
                JOIN pg_class t ON t.oid = c.conrelid WHERE t.relname = $1 AND c.contype = 'c'`,
        values: [table],
      });
      const def = rows.map((r) => r.def).find((d) => d.includes(`(${column} = ANY`) || d.includes(`${column} = ANY`));
      expect(def, `${table}.${column} check`).toBeDefined();
      return [...def!.matchAll(/'([a-z_]+)'::text/g)].map((m) => m[1]);
    };
    expect(await check('tasks', 'state')).toEqual([...TASK_STATES]);
    expect(await check('tasks', 'park_reason')).toEqual([...PARK_REASONS]);
    expect(await check('runtime_calls', 'status')).toEqual([...CALL_STATUSES]);
  });

  it('refuses to run when a released migration was edited', async () => {
    const edited = loadMigrations().map((m, i) => (i === 0 ? { ...m, checksum: 'sha-of-something-else' } : m));
    await expect(migrate(db, edited)).rejects.toMatchObject({ code: 'migration_failed' });
  });

  it('refuses a bad park reason at the database', async () => {
    await db.query({ text: `INSERT INTO cases (id, case_type, origin_key, customer) VALUES ('00000000-0000-7000-8000-000000000001', 't', 'o1', 'c')` });
    await expect(
      db.query({ text: `INSERT INTO tasks (id, case_id, profile, state, park_reason) VALUES ('00000000-0000-7000-8000-000000000002', '00000000-0000-7000-8000-000000000001', 'p', 'parked', 'bored')` }),
    ).rejects.toMatchObject({ code: 'constraint_violation' });
    await expect(
      db.query({ text: `INSERT INTO tasks (id, case_id, profile, state) VALUES ('00000000-0000-7000-8000-000000000003', '00000000-0000-7000-8000-000000000001', 'p', 'parked')` }),
    ).rejects.toMatchObject({ code: 'constraint_violation' });
  });
});
