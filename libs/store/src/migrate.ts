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
import { setTimeout as sleep } from 'node:timers/promises';
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

interface RecordedMigration {
  version: number;
  name: string;
  checksum: string;
}

/** Every recorded migration must be one of this build's, byte for byte. */
function checkRecorded(rows: readonly RecordedMigration[], migrations: readonly Migration[]): void {
  for (const r of rows) {
    const m = migrations.find((x) => x.version === r.version);
    if (!m) throw new MigrationError(`database has migration ${r.name} that this build does not know; refusing to run an older build`, { version: r.version });
    if (m.checksum !== r.checksum) throw new MigrationError(`released migration ${r.name} was edited (checksum differs); add a new migration instead`, { version: r.version });
  }
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
    checkRecorded(rows, migrations);
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

/** What a service finds in the database at start, without changing anything. */
export interface SchemaStatus {
  /** Highest applied version (0: none). */
  readonly current: number;
  /** The version this build needs. */
  readonly required: number;
  /** Migrations this build has and the database lacks. */
  readonly pending: readonly string[];
  /** The connected role may create objects in the schema (it could migrate). */
  readonly canMigrate: boolean;
}

/**
 * Reads the applied migrations without creating anything (a role without CREATE must be able to
 * ask). Throws MigrationError when the database is ahead of this build or a migration was edited.
 */
export async function schemaStatus(db: Db, migrations: Migration[] = loadMigrations()): Promise<SchemaStatus> {
  const { rows: [probe] } = await db.query<{ present: boolean; can: boolean }>({
    text: `SELECT to_regclass('schema_migrations') IS NOT NULL AS present,
                  has_schema_privilege(current_schema(), 'CREATE') AS can`,
  });
  const rows = probe?.present
    ? (await db.query<RecordedMigration>({ text: 'SELECT version, name, checksum FROM schema_migrations ORDER BY version' })).rows
    : [];
  checkRecorded(rows, migrations);
  const applied = new Set(rows.map((r) => r.version));
  return {
    current: rows.at(-1)?.version ?? 0,
    required: migrations.at(-1)?.version ?? 0,
    pending: migrations.filter((m) => !applied.has(m.version)).map((m) => m.name),
    canMigrate: probe?.can ?? false,
  };
}

/** Why a service cannot start on this schema, for logs and readiness; no credentials. */
export function schemaBehindMessage(status: SchemaStatus, migrateOnStart: boolean): string {
  const why = migrateOnStart ? 'this role may not alter the schema' : 'EVERDICT_MIGRATE_ON_START is false';
  return `database schema is at version ${status.current}, this build needs ${status.required} (pending: ${status.pending.join(', ')}); ${why}: run \`everdict migrate\` as the schema owner`;
}

/** Postgres's insufficient_privilege: the role may not read what it asked for. */
const isPrivilegeDenied = (err: unknown): boolean => typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '42501';

/** Why a node waits when its role may not read the schema's records yet. */
export const NOT_GRANTED = "this role may not read the schema's migration records yet: run `everdict migrate --grant-to <role>` as the schema owner";

/**
 * Fleet start: migrate when allowed and able, otherwise wait (polling every `pollMs`) until
 * someone else — `everdict migrate`, compose's one-shot service — brought the schema up to
 * date. `onBehind` hears the reason once per wait, so the process says why it is not ready.
 * A role not yet granted the schema it reads (`everdict migrate --grant-to` commits the
 * migrations, then the grants: a poll can fall between them) waits too, never fails the start.
 */
export async function ensureSchema(
  db: Db,
  opts: { migrateOnStart: boolean; onBehind: (message: string) => void; onApplied?: (names: readonly string[]) => void; pollMs?: number; migrations?: Migration[]; signal?: AbortSignal },
): Promise<void> {
  const migrations = opts.migrations ?? loadMigrations();
  let told = false;
  let toldDenied = false;
  for (;;) {
    const status = await schemaStatus(db, migrations).catch((err: unknown) => {
      if (isPrivilegeDenied(err)) return null;
      throw err;
    });
    if (status === null) {
      if (!toldDenied) opts.onBehind(NOT_GRANTED);
      toldDenied = true;
    } else {
      if (status.pending.length === 0) return;
      if (opts.migrateOnStart && status.canMigrate) {
        const result = await migrate(db, migrations);
        if (result.applied.length) opts.onApplied?.(result.applied);
        return;
      }
      if (!told) opts.onBehind(schemaBehindMessage(status, opts.migrateOnStart));
      told = true;
    }
    // A shutdown while waiting stops the polling and never resumes the start: the drain that
    // aborted `signal` owns the exit, and a start that "failed" would only log a false fatal.
    const aborted = await sleep(opts.pollMs ?? 2_000, false, opts.signal ? { signal: opts.signal } : {}).catch(() => true);
    if (aborted) return new Promise<never>(() => {});
  }
}

/** A Postgres role name Everdict will grant to: lower-case identifier, nothing to quote. */
const ROLE_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * The services' role: reads and writes rows, never alters the schema. Grants SELECT, INSERT,
 * UPDATE, DELETE on every table and USAGE, SELECT on every sequence of the schema; takes
 * UPDATE, DELETE and TRUNCATE on `ledger` (append-only, also refused by its triggers) and every
 * write on `schema_migrations`; revokes CREATE on the schema from it and from PUBLIC. Run after
 * every migration (`everdict migrate --grant-to`), so new tables are covered. With `password`,
 * the role is created LOGIN when missing, or its password changed (rotation); without it, the
 * role must exist. The password only ever travels as a quoted literal built by the server.
 */
export async function grantAppRole(db: Db, role: string, opts: { password?: string } = {}): Promise<{ created: boolean }> {
  if (!ROLE_NAME.test(role)) throw new MigrationError(`--grant-to must be a lower-case role name ([a-z_][a-z0-9_]*), got ${JSON.stringify(role)}`, { field: '--grant-to' });
  return db.transaction(async (tx) => {
    const { rows: [owner] } = await tx.query<{ exists: boolean; is_owner: boolean }>({
      text: `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1) AS exists,
                    current_user = $1 AS is_owner`,
      values: [role],
    });
    if (owner?.is_owner) throw new MigrationError(`--grant-to names the connected role ${role}; the services' role must differ from the schema owner`, { field: '--grant-to' });
    const exists = owner?.exists ?? false;
    if (!exists && opts.password === undefined) throw new MigrationError(`role ${role} does not exist; create it (CREATE ROLE ${role} LOGIN PASSWORD …) or set EVERDICT_APP_DB_PASSWORD`, { field: '--grant-to' });
    const statements: string[] = [];
    if (opts.password !== undefined) {
      const { rows: [built] } = await tx.query<{ sql: string }>({
        text: `SELECT format(CASE WHEN $3 THEN 'ALTER ROLE %I LOGIN PASSWORD %L' ELSE 'CREATE ROLE %I LOGIN PASSWORD %L' END, $1::text, $2::text) AS sql`,
        values: [role, opts.password, exists],
      });
      statements.push(built!.sql);
    }
    const { rows: [names] } = await tx.query<{ database: string; schema: string }>({ text: 'SELECT current_database() AS database, current_schema() AS schema' });
    const q = (id: string) => `"${id.replace(/"/g, '""')}"`;
    const db_ = q(names!.database);
    const schema = q(names!.schema);
    statements.push(
      `GRANT CONNECT, TEMPORARY ON DATABASE ${db_} TO ${role}`,
      `REVOKE CREATE ON DATABASE ${db_} FROM ${role}`,
      `REVOKE CREATE ON SCHEMA ${schema} FROM PUBLIC`,
      `REVOKE CREATE ON SCHEMA ${schema} FROM ${role}`,
      `GRANT USAGE ON SCHEMA ${schema} TO ${role}`,
      `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${schema} TO ${role}`,
      `REVOKE UPDATE, DELETE, TRUNCATE ON ledger FROM ${role}`,
      `REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON schema_migrations FROM ${role}`,
      `GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA ${schema} TO ${role}`,
    );
    for (const text of statements) await tx.query({ text });
    return { created: !exists };
  });
}
