/**
 * Issue 12 item 7, end to end: a fleet node connected as the services' role, with its URL from
 * a file (DATABASE_URL_FILE) and EVERDICT_MIGRATE_ON_START=false, stays not-ready with a clear
 * message on an unmigrated database, becomes ready once `everdict migrate --grant-to` ran as the
 * owner, and runs while that role cannot alter the schema.
 */
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import amqplib from 'amqplib';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { deleteTopology, loadTopology } from '@everdict/bus';
import { TEST_AMQP_URL, TEST_DATABASE_URL, amqpPrefix, eventually, freshDatabase, readinessBudgetMs } from '@everdict/testkit';

const run = promisify(execFile);
const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const SAMPLE_CONFIG = fileURLToPath(new URL('../../infra/config/fleet.json', import.meta.url));
const ROLE = `ev_app_${process.pid}_${randomBytes(3).toString('hex')}`;
const PASSWORD = `pw-${randomBytes(6).toString('hex')}`;
const CLEAN = { DATABASE_URL: undefined, AMQP_URL: undefined, MIGRATE_DATABASE_URL: undefined, EVERDICT_APP_DB_PASSWORD: undefined };

async function everdict(args: string[], env: Record<string, string | undefined>): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--conditions=source', '--import', 'tsx', main, ...args], { env: { ...process.env, ...CLEAN, ...env } as NodeJS.ProcessEnv });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

function logged(lines: readonly string[], msg: string): Record<string, unknown> | undefined {
  for (const l of lines) {
    try {
      const o = JSON.parse(l) as Record<string, unknown>;
      if (o.msg === msg) return o;
    } catch {
      // not a JSON line
    }
  }
  return undefined;
}

async function admin<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

describe('least privilege: migrate as the owner, run as the services role', () => {
  const prefix = amqpPrefix('least_priv');
  let dbUrl: string | undefined;
  let child: ChildProcess | undefined;
  afterAll(async () => {
    child?.kill('SIGKILL');
    if (dbUrl) await admin(dbUrl, (c) => c.query(`DROP OWNED BY ${ROLE}`)).catch(() => {});
    await admin(TEST_DATABASE_URL, (c) => c.query(`DROP ROLE IF EXISTS ${ROLE}`));
    const conn = await amqplib.connect(TEST_AMQP_URL);
    const ch = await conn.createChannel();
    await deleteTopology(ch, loadTopology({ prefix }));
    await conn.close();
  });

  it('waits not-ready on an unmigrated schema, runs once migrated, and cannot alter the schema', async () => {
    const { url } = await freshDatabase('least_priv');
    dbUrl = url;
    // The operator creates the role (or lets `everdict migrate --grant-to` create it); LOGIN only.
    await admin(TEST_DATABASE_URL, (c) => c.query(`CREATE ROLE ${ROLE} LOGIN`));
    const appUrl = new URL(url);
    appUrl.username = ROLE;
    appUrl.password = PASSWORD;
    const dir = mkdtempSync(join(tmpdir(), 'everdict-least-priv-'));
    const appUrlFile = join(dir, 'database_url');
    writeFileSync(appUrlFile, `${appUrl.toString()}\n`);
    const ownerUrlFile = join(dir, 'migrate_database_url');
    writeFileSync(ownerUrlFile, url);
    const passwordFile = join(dir, 'app_password');
    writeFileSync(passwordFile, PASSWORD);

    child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', main, 'start', '--service', 'gate'], {
      env: { ...process.env, ...CLEAN, PORT: '0', LOG_LEVEL: 'info', DATABASE_URL_FILE: appUrlFile, AMQP_URL: TEST_AMQP_URL, EVERDICT_MIGRATE_ON_START: 'false', EVERDICT_AMQP_PREFIX: prefix, EVERDICT_CONFIG: SAMPLE_CONFIG } as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      const parts = buf.split('\n');
      buf = parts.pop() ?? '';
      lines.push(...parts);
    });
    child.stderr!.on('data', (d: Buffer) => lines.push(d.toString()));
    const exited = new Promise<number | null>((resolve) => child!.on('exit', (code) => resolve(code)));

    const waiting = await eventually(() => logged(lines, 'not ready: database schema not migrated; waiting'), { timeoutMs: readinessBudgetMs(), what: 'schema-not-migrated warning' });
    expect(waiting.reason).toMatch(/^database schema is at version 0, this build needs \d+ \(pending: 0001_core, .*\); EVERDICT_MIGRATE_ON_START is false: run `everdict migrate` as the schema owner$/);
    const port = logged(lines, 'health and metrics listening')!.port as number;
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(503);
    // The node did not migrate itself: nothing exists yet.
    expect((await admin(url, (c) => c.query<{ t: string | null }>(`SELECT to_regclass('ledger')::text AS t`))).rows[0]!.t).toBeNull();

    const migrated = await everdict(['migrate', '--grant-to', ROLE, '--json'], { MIGRATE_DATABASE_URL_FILE: ownerUrlFile, EVERDICT_APP_DB_PASSWORD_FILE: passwordFile });
    expect(migrated.stderr).toBe('');
    expect(migrated.code).toBe(0);
    expect(JSON.parse(migrated.stdout)).toMatchObject({ applied: expect.arrayContaining(['0001_core', '0006_ledger_append_only']) as unknown, granted: { role: ROLE, created: false } });

    await eventually(() => logged(lines, 'fleet node ready'), { timeoutMs: readinessBudgetMs(), what: 'fleet node ready after migrate' });
    await eventually(async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200, { what: '/readyz 200' });
    // The node's connections are the services' role, which may not alter the schema.
    const users = await admin(url, (c) => c.query<{ usename: string }>(`SELECT DISTINCT usename FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'gate'`));
    expect(users.rows.map((r) => r.usename)).toEqual([ROLE]);
    const denied = await admin(appUrl.toString(), (c) => c.query('ALTER TABLE tasks ADD COLUMN intruder int').then(() => 'altered', (err: { code?: string }) => err.code));
    expect(denied).toBe('42501');

    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(lines.join('\n')).not.toContain(PASSWORD);
  });

  it('a node waiting for the schema drains and exits 0 on SIGTERM', async () => {
    const { url } = await freshDatabase('least_priv_wait');
    const waiting = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', main, 'start', '--service', 'gate'], {
      env: { ...process.env, ...CLEAN, PORT: '0', DATABASE_URL: url, AMQP_URL: TEST_AMQP_URL, EVERDICT_MIGRATE_ON_START: 'false', EVERDICT_AMQP_PREFIX: prefix, EVERDICT_CONFIG: SAMPLE_CONFIG } as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    waiting.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => waiting.on('exit', (code) => resolve(code)));
    try {
      await eventually(() => out.includes('not ready: database schema not migrated; waiting') || undefined, { timeoutMs: readinessBudgetMs(), what: 'waiting for the schema' });
      // The owner connection could migrate; EVERDICT_MIGRATE_ON_START=false says it must not.
      expect(out).toContain('EVERDICT_MIGRATE_ON_START is false');
      waiting.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(out).toContain('shutdown complete');
      expect(out, 'a shutdown is not a failed start').not.toContain('service failed to start');
    } finally {
      waiting.kill('SIGKILL');
    }
  });

  it('X and X_FILE both set is a configuration error naming both; exit 2', async () => {
    const r = await everdict(['migrate'], { DATABASE_URL: 'postgres://u:hunter2@h/db', DATABASE_URL_FILE: '/nonexistent' });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('DATABASE_URL, DATABASE_URL_FILE: both are set');
    expect(r.stderr).not.toContain('hunter2');
    const s = await everdict(['start', '--service', 'gate'], { DATABASE_URL_FILE: '/nonexistent/url', AMQP_URL: TEST_AMQP_URL, EVERDICT_CONFIG: SAMPLE_CONFIG });
    expect(s.code).toBe(2);
    expect(s.stderr).toContain('DATABASE_URL_FILE: names "/nonexistent/url", which cannot be read (ENOENT)');
  });
});
