import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CALL_STATUSES, CANCEL_MODES, CASE_STATES, GATE_STATES, GRANT_STATES, INBOX_DISPOSITIONS, PARK_REASONS,
  TASK_STATES, VERDICTS,
} from '@everdict/contracts';
import { EFFECT_DISPATCH_STATES } from '../src/effects.js';
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

  // Migrations spell every closed value list out literally; the tuples in code are the other
  // copy. Adding a value to either side without the other (a new migration) fails here, naming
  // the list, before the database refuses a row the code believes valid.
  it.each([
    ['TASK_STATES', 'tasks', 'state', TASK_STATES],
    ['PARK_REASONS', 'tasks', 'park_reason', PARK_REASONS],
    ['CANCEL_MODES', 'tasks', 'cancel_requested', CANCEL_MODES],
    ['CASE_STATES', 'cases', 'state', CASE_STATES],
    ['CANCEL_MODES', 'cases', 'stop_mode', CANCEL_MODES],
    ['CALL_STATUSES', 'runtime_calls', 'status', CALL_STATUSES],
    ['GATE_STATES', 'gates', 'state', GATE_STATES],
    ['VERDICTS', 'decisions', 'verdict', VERDICTS],
    ['GRANT_STATES', 'grants', 'state', GRANT_STATES],
    ['EFFECT_DISPATCH_STATES', 'effect_dispatches', 'state', EFFECT_DISPATCH_STATES],
  ] as const)('the CHECK on %s (%s.%s) accepts exactly the list in code', async (list, table, column, values) => {
    const { rows } = await db.query<{ def: string }>({
      text: `SELECT pg_get_constraintdef(c.oid) AS def
               FROM pg_constraint c
               JOIN pg_class t ON t.oid = c.conrelid
               JOIN pg_attribute a ON a.attrelid = t.oid AND a.attname = $2::text
              WHERE t.relname = $1::text AND c.contype = 'c' AND c.conkey = ARRAY[a.attnum]`,
      values: [table, column],
    });
    // Only the membership CHECK has the shape `(col = ANY (ARRAY[...]))`; others on the same
    // column (e.g. an invariant joining two columns) name more than this one column.
    const lists = rows
      .map((r) => new RegExp(`^CHECK \\(\\(${column} = ANY \\(ARRAY\\[(.*)\\]\\)\\)\\)$`).exec(r.def)?.[1])
      .filter((l): l is string => l !== undefined);
    expect(lists, `${list}: one membership CHECK on ${table}.${column}; found ${rows.map((r) => r.def).join(' | ') || 'none'}`).toHaveLength(1);
    const inSchema = [...lists[0]!.matchAll(/'((?:[^']|'')*)'::text/g)].map((m) => m[1]!.replace(/''/g, "'"));
    expect([...inSchema].sort(), `${list} vs CHECK on ${table}.${column}: a new value needs a new migration`).toEqual([...values].sort());
  });

  // The inbox's list is an enum, not a CHECK (migration 0026: a CHECK costs every insert statement).
  it('the enum of INBOX_DISPOSITIONS (inbox_messages.disposition) holds exactly the list in code', async () => {
    const { rows } = await db.query<{ label: string }>({
      text: `SELECT e.enumlabel AS label FROM pg_attribute a JOIN pg_class t ON t.oid = a.attrelid JOIN pg_enum e ON e.enumtypid = a.atttypid
              WHERE t.relname = 'inbox_messages' AND a.attname = 'disposition' ORDER BY e.enumsortorder`,
    });
    expect(rows.map((r) => r.label).sort(), 'INBOX_DISPOSITIONS vs the enum of inbox_messages.disposition: a new value needs a new migration').toEqual([...INBOX_DISPOSITIONS].sort());
    await expect(db.query({ text: `INSERT INTO inbox_messages (consumer, message_id, payload_hash, type, disposition) VALUES ('c', '00000000-0000-7000-8000-000000000009', 'h', 't', 'lost')` })).rejects.toThrow(/inbox_disposition/);
  });

  // Migration 0027 tests a history block's hash and prev without a regular expression: it must
  // accept and refuse exactly what the pattern did.
  it('a history block keeps exactly the hashes of the pattern ^sha256:[0-9a-f]{64}$, in hash and prev', async () => {
    const hex = 'ab'.repeat(32);
    const values = [
      `sha256:${hex}`, `sha256:${'0123456789abcdef'.repeat(4)}`, `sha256:${hex.toUpperCase()}`, `sha256:${hex.slice(1)}`, `sha256:${hex}0`,
      `sha512:${hex}`, `SHA256:${hex}`, `sha256:${hex.slice(1)}g`, `sha256:${hex.slice(2)}é`, `sha256:${hex.slice(3)}é`, `sha256:${hex}\n`,
      ` sha256:${hex.slice(1)}`, `sha256: ${hex.slice(1)}`, `sha256:${hex.slice(1)}-`, '', 'sha256:',
    ];
    const caseId = '00000000-0000-7000-8000-0000000000b1';
    await db.query({ text: `INSERT INTO cases (id, case_type, origin_key, customer) VALUES ($1, 't', 'o-blocks', 'c')`, values: [caseId] });
    /** Whether the block is kept; false only when a hash CHECK refused it (any other error fails the test). */
    const kept = (hash: string, prev: string | null) =>
      db.query({ text: 'INSERT INTO history_blocks (case_id, hash, prev, size_bytes, bytes) VALUES ($1, $2, $3, 0, $4)', values: [caseId, hash, prev, Buffer.alloc(0)] }).then(
        () => true,
        (err: unknown) => {
          if (/history_blocks_(hash|prev)_check/.test(String((err as Error).message))) return false;
          throw err;
        },
      );
    for (const [n, v] of values.entries()) {
      const { rows } = await db.query<{ ok: boolean }>({ text: `SELECT $1::text ~ '^sha256:[0-9a-f]{64}$' AS ok`, values: [v] });
      const expected = rows[0]!.ok;
      expect({ value: v, asHash: await kept(v, null), asPrev: await kept(`sha256:${n.toString(16).padStart(64, 'c')}`, v) }).toEqual({ value: v, asHash: expected, asPrev: expected });
    }
    expect(values.filter((v) => /^sha256:[0-9a-f]{64}$/.test(v))).toHaveLength(2);
    // A block with no prev (a span or tail block) is kept.
    expect(await kept(`sha256:${'d'.repeat(64)}`, null)).toBe(true);
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
