/**
 * Test support shared by every package's integration tests (DESIGN §8): each test file gets
 * its own Postgres database and its own RabbitMQ name prefix, so two runs never collide.
 * Names carry the creating process id and a random suffix, so they never repeat: a test that
 * does not call `drop()` leaves its database for inspection (`ev_<test>_<pid>_<hex>`), and
 * nothing removes it later — drop those by hand when done with them.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
export const TEST_AMQP_URL = process.env.TEST_AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

/** A short, safe identifier from a test name plus a random suffix. */
export function uniqueName(label: string): string {
  const slug = label.toLowerCase().replace(/[^a-z0-9]+/g, '_').replace(/^_|_$/g, '').slice(0, 30);
  return `${slug}_${process.pid}_${randomBytes(3).toString('hex')}`;
}

/** Creates an empty database named after the test; returns its URL. */
export async function freshDatabase(label: string): Promise<{ url: string; name: string; drop: () => Promise<void> }> {
  const name = `ev_${uniqueName(label)}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  const drop = async () => {
    const c = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await c.connect();
    try {
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    } finally {
      await c.end();
    }
  };
  return { url: url.toString(), name, drop };
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
