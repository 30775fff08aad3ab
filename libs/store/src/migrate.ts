/**
 * Migrations: numbered, append-only `.sql` files in libs/store/migrations, applied in order in
 * ONE transaction under an advisory lock, so N services starting at once apply each file
 * exactly once. A released file must never change: its checksum (sha256 of the file's bytes)
 * is recorded and compared. Files are literal SQL, never rendered from code, so nothing
 * outside the file can change its checksum; a new state value arrives as a new migration, and
 * test/migrate.int.test.ts fails while the CHECK lists and the contracts' tuples disagree.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sha256Hex } from '@everdict/contracts';
import type { Db } from './db.js';
import { MigrationError } from './errors.js';

/** Arbitrary but fixed: the advisory lock key every Everdict migrator takes. */
const MIGRATION_LOCK_KEY = 0x45564452; // "EVDR"

interface Migration {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

export function migrationsDir(): string {
  // Works from src/ (tests, tsx) and dist/src/ (compiled): walk up to the package root.
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    const candidate = join(dir, 'migrations');
    if (existsSync(candidate)) return candidate;
    dir = dirname(dir);
  }
  throw new MigrationError('migrations folder not found');
}

export function loadMigrations(dir = migrationsDir()): Migration[] {
  const files = readdirSync(dir).filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f)).sort();
  const out: Migration[] = [];
  for (const file of files) {
    const version = Number(file.slice(0, 4));
    if (out.some((m) => m.version === version)) throw new MigrationError(`two migrations numbered ${version}`, { file });
    const sql = readFileSync(join(dir, file), 'utf8');
    out.push({ version, name: file.replace(/\.sql$/, ''), sql, checksum: sha256Hex(sql) });
  }
  out.forEach((m, i) => {
    if (m.version !== i + 1) throw new MigrationError(`migration numbers must be contiguous from 1; found ${m.name}`, { file: m.name });
  });
  return out;
}

interface MigrateResult {
  applied: string[];
  current: number;
}

export async function migrate(db: Db, migrations: Migration[] = loadMigrations()): Promise<MigrateResult> {
  return db.transaction(async (tx) => {
    await tx.query({ text: 'SELECT pg_advisory_xact_lock($1)', values: [MIGRATION_LOCK_KEY] });
    await tx.query({
      text: `CREATE TABLE IF NOT EXISTS schema_migrations (
               version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,
               applied_at timestamptz NOT NULL DEFAULT now())`,
    });
    const { rows } = await tx.query<{ version: number; name: string; checksum: string }>({
      text: 'SELECT version, name, checksum FROM schema_migrations ORDER BY version',
    });
    const known = new Map(rows.map((r) => [r.version, r]));
    for (const r of rows) {
      const m = migrations.find((x) => x.version === r.version);
      if (!m) throw new MigrationError(`database has migration ${r.name} that this build does not know; refusing to run an older build`, { version: r.version });
      if (m.checksum !== r.checksum) throw new MigrationError(`released migration ${r.name} was edited (checksum differs); add a new migration instead`, { version: r.version });
    }
    const applied: string[] = [];
    for (const m of migrations) {
      if (known.has(m.version)) continue;
      await tx.query({ text: m.sql });
      await tx.query({ text: 'INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', values: [m.version, m.name, m.checksum] });
      applied.push(m.name);
    }
    return { applied, current: migrations.at(-1)?.version ?? 0 };
  });
}
