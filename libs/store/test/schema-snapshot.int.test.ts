/**
 * Schema snapshot: the migrations, applied to an empty database, must produce exactly the
 * schema checked in at libs/store/schema.sql (`pg_dump --schema-only`, normalised). A change
 * to the schema is then always visible in review as a diff of that file, and a migration
 * edited by accident (or one whose effect differs from what its author believed) fails here.
 *
 * After adding a migration, regenerate the snapshot and review its diff:
 *
 *   UPDATE_SCHEMA_SNAPSHOT=1 npx vitest run libs/store/test/schema-snapshot.int.test.ts
 *
 * pg_dump is required (the Postgres 15 client: /usr/lib/postgresql/15/bin/pg_dump, else
 * `pg_dump` on PATH, or PG_DUMP=/path/to/pg_dump); the test fails, never skips, without it.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase } from '@everdict/testkit';
import { createPgDb } from '../src/pg.js';
import { migrate } from '../src/migrate.js';

const SNAPSHOT = join(dirname(fileURLToPath(import.meta.url)), '..', 'schema.sql');

function findPgDump(): string {
  const candidates = [process.env.PG_DUMP, '/usr/lib/postgresql/15/bin/pg_dump', 'pg_dump'].filter((c): c is string => !!c);
  for (const c of candidates) {
    if (c.includes('/') && !existsSync(c)) continue;
    if (spawnSync(c, ['--version'], { encoding: 'utf8' }).status === 0) return c;
  }
  throw new Error(`pg_dump not found (tried ${candidates.join(', ')}); install the PostgreSQL 15 client or set PG_DUMP`);
}

/**
 * Keeps only what the migrations decide: drops comments, session SET lines, psql's
 * per-dump `\restrict` keys, ownership and privileges (also excluded by flags), and collapses
 * blank runs, so the snapshot is stable across dump runs, client patch versions and roles.
 */
function normaliseDump(dump: string): string {
  const kept = dump
    .split('\n')
    .map((line) => line.replace(/\s+$/, ''))
    .filter((line) => !line.startsWith('--'))
    .filter((line) => !/^SET\s/.test(line))
    .filter((line) => !/^SELECT pg_catalog\.set_config\('search_path'/.test(line))
    .filter((line) => !/^\\(un)?restrict\b/.test(line))
    .filter((line) => !/\sOWNER TO\s/.test(line))
    .filter((line) => !/^(GRANT|REVOKE)\s/.test(line));
  return `${kept.join('\n').replace(/\n{3,}/g, '\n\n').trim()}\n`;
}

describe('schema snapshot', () => {
  let url: string;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const fresh = await freshDatabase('schema_snapshot');
    url = fresh.url;
    drop = fresh.drop;
    const db = createPgDb(url, { max: 1 });
    try {
      await migrate(db);
    } finally {
      await db.close();
    }
  });
  afterAll(async () => drop());

  it('the migrated schema equals libs/store/schema.sql', () => {
    const dump = execFileSync(findPgDump(), ['--schema-only', '--no-owner', '--no-privileges', '--dbname', url], {
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    });
    const actual = normaliseDump(dump);
    if (process.env.UPDATE_SCHEMA_SNAPSHOT === '1') writeFileSync(SNAPSHOT, actual);
    expect(existsSync(SNAPSHOT), `${SNAPSHOT} missing; generate it with UPDATE_SCHEMA_SNAPSHOT=1`).toBe(true);
    // A plain string comparison: vitest prints the line diff, and the message says how to accept it.
    expect(actual, 'schema differs from libs/store/schema.sql; if intended, regenerate with UPDATE_SCHEMA_SNAPSHOT=1 and review the diff').toBe(
      readFileSync(SNAPSHOT, 'utf8'),
    );
  });
});
