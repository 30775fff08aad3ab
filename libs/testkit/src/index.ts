/**
 * Test support shared by every package's integration tests (DESIGN §8): each test file gets
 * its own Postgres database and its own RabbitMQ name prefix, so two runs never collide.
 * Names carry the creating process id and a random suffix, so they never repeat
 * (`ev_<test>_<pid>_<hex>`). Every database `freshDatabase` creates is registered: under vitest,
 * `vitest.setup.ts` drops a file's databases once the file has passed and keeps them when any
 * of its tests or hooks failed, for inspection (drop those by hand when done with them).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const TEST_AMQP_URL = process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

/** A short, safe identifier from a test name plus a random suffix. */
function uniqueName(label: string): string {
  const slug = label.toLowerCase().replace(/[^a-z0-9]+/g, '_').replace(/^_|_$/g, '').slice(0, 30);
  return `${slug}_${process.pid}_${randomBytes(3).toString('hex')}`;
}

/** Creates an empty database named after the test and registers it; returns its URL. */
export async function freshDatabase(label: string): Promise<{ url: string; name: string; drop: () => Promise<void> }> {
  const name = `ev_${uniqueName(label)}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  createdDatabases().add(name);
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  const drop = async () => {
    const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await c.connect();
    try {
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      createdDatabases().delete(name);
    } finally {
      await c.end();
    }
  };
  return { url: url.toString(), name, drop };
}

/**
 * The databases this process created and has not dropped. On globalThis, so a vitest setup file
 * and the test file it runs with see one registry even if each loaded its own copy of this module.
 */
export function createdDatabases(): Set<string> {
  const key = Symbol.for('everdict.testkit.createdDatabases');
  const holder = globalThis as { [k: symbol]: Set<string> | undefined };
  return (holder[key] ??= new Set<string>());
}

/**
 * Drops a database nobody uses any more: a plain DROP, retried while connections are still
 * going away (a stopped child's backends, a pool closing), never terminating one. A database
 * still in use after `waitMs` (default 10 s) is kept; returns whether it was dropped.
 */
export async function dropUnusedDatabase(name: string, waitMs = 10_000): Promise<boolean> {
  const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await c.connect();
  try {
    const deadline = Date.now() + waitMs;
    for (;;) {
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name}`);
        createdDatabases().delete(name);
        return true;
      } catch (err) {
        // 55006 object_in_use: a connection to it is still open.
        if ((err as { code?: string }).code !== '55006') throw err;
        if (Date.now() > deadline) return false;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    await c.end();
  }
}

/** A RabbitMQ name prefix unique to this test file and run. */
export function amqpPrefix(label: string): string {
  return `t_${uniqueName(label)}`;
}

/** Polls `probe` until it returns a truthy value or the deadline passes. */
export async function eventually<T>(probe: () => Promise<T | undefined | null | false> | T | undefined | null | false, opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${opts.what ?? 'condition'}${last ? `: ${String(last)}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 50));
  }
}
export * from './providerServer.js';
export * from './toolTrace.js';
export * from './everdictStart.js';
export * from './tools.js';
export * from './readiness.js';
export * from './ports.js';
export * from './mcpHttpServer.js';
export * from './rabbitCluster.js';
export * from './pgCluster.js';
export * from './brokerUsers.js';
export * from './procCpu.js';
export * from './benchEnv.js';
