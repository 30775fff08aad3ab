/**
 * Fixtures for the intake tests: a migrated database and broker prefix of the test file's own,
 * and a REAL intake (plus the gate, as in one fleet node) serving HTTP in this process via
 * runService on a free port. The outbox relay is off so the tests read the outbox rows intake
 * committed (the relay's publishing is tested with the bus).
 */
import amqplib from 'amqplib';
import { sha256Hex } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import { deleteTopology, loadTopology } from '@everdict/bus';
import { startGate } from '@everdict/gate';
import { openSubstrate } from '@everdict/host';
import type { Substrate } from '@everdict/host';
import { startIntake } from '@everdict/intake';
import type { IntakeOptions, RunningIntake } from '@everdict/intake';
import { runService } from '@everdict/service-kit';
import type { RunningService } from '@everdict/service-kit';
import { createPgDb, migrate } from '@everdict/store';
import type { Db } from '@everdict/store';
import { TEST_AMQP_URL, amqpPrefix, freshDatabase } from '@everdict/testkit';

export const TOKENS = {
  acme: 'acme-agent-token-01',
  globex: 'globex-agent-token-02',
  olga: 'operator-olga-token-03',
  nobody: 'nobody-token-04',
} as const;

const hashOf = (t: string) => `sha256:${sha256Hex(t)}`;

export function fleetConfig(): FleetConfig {
  return {
    version: 1,
    routes: { r: { adapter: 'scripted', model: 'none', scriptPath: 'none.json' } },
    profiles: { p: { version: '3', route: 'r', prompt: 'intake test', budget: { maxActiveMinutes: 30 } } },
    caseTypes: {
      support: { rootProfile: 'p', scope: { reads: 'all', writes: ['billing'], forbidden: [] }, budget: { maxActiveMinutes: 45 } },
      plain: { rootProfile: 'p', scope: { reads: 'all', writes: [], forbidden: [] } },
    },
    principals: {
      // Customer-bound principals see only their own customer's cases.
      acme: { tokenHash: hashOf(TOKENS.acme), roles: ['customer'], customers: ['acme'] },
      globex: { tokenHash: hashOf(TOKENS.globex), roles: ['customer'], customers: ['globex'] },
      // No `customers`: every customer.
      olga: { tokenHash: hashOf(TOKENS.olga), roles: ['operator', 'finance'] },
      nobody: { tokenHash: hashOf(TOKENS.nobody), roles: [], customers: [] },
    },
    gatePolicies: { payment: { decisions: [{ decision: 'HW-payment', role: 'finance' }] } },
  };
}

export interface IntakeFixture {
  readonly url: string;
  readonly db: Db;
  readonly databaseUrl: string;
  readonly prefix: string;
  readonly service: RunningService;
  readonly intake: RunningIntake;
  readonly substrate: Substrate;
  close(): Promise<void>;
}

/** A database, a prefix and one fleet node running intake and gate; `close` removes all of it. */
export async function startFixture(label: string, opts: IntakeOptions = {}): Promise<IntakeFixture> {
  const database = await freshDatabase(label);
  const prefix = amqpPrefix(label);
  const db = createPgDb(database.url, { max: 4 });
  await migrate(db);
  let intake: RunningIntake | undefined;
  let substrate: Substrate | undefined;
  const service = await runService({
    name: 'intake',
    port: 0,
    env: { DATABASE_URL: database.url, AMQP_URL: TEST_AMQP_URL, LOG_LEVEL: 'error' },
    signals: [],
    exit: () => undefined,
    async start(ctx) {
      substrate = await openSubstrate(ctx, { databaseUrl: database.url, amqpUrl: TEST_AMQP_URL, amqpPrefix: prefix, relay: false, poolSize: 12 });
      await startGate(ctx, substrate, fleetConfig());
      intake = await startIntake(ctx, substrate, fleetConfig(), { databaseUrl: database.url, amqpUrl: TEST_AMQP_URL, ...opts });
    },
  });
  return {
    url: `http://127.0.0.1:${service.port}`,
    db,
    databaseUrl: database.url,
    prefix,
    service,
    intake: intake!,
    substrate: substrate!,
    async close() {
      await service.shutdown('test done');
      await db.close();
      const conn = await amqplib.connect(TEST_AMQP_URL);
      try {
        const ch = await conn.createChannel();
        await deleteTopology(ch, loadTopology({ prefix }));
        await ch.close();
      } finally {
        await conn.close();
      }
      await database.drop();
    },
  };
}

export interface Reply {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

export async function call(base: string, method: string, path: string, opts: { token?: string; body?: unknown; raw?: string | Buffer; headers?: Record<string, string> } = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.token) headers['authorization'] = `Bearer ${opts.token}`;
  let body: string | Buffer | undefined;
  if (opts.raw !== undefined) body = opts.raw;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] = 'application/json';
  }
  const res = await fetch(`${base}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
  const text = await res.text();
  return { status: res.status, body: text.length ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

export async function count(db: Db, text: string, values: unknown[] = []): Promise<number> {
  return (await db.query<{ n: number }>({ text: `SELECT count(*)::int AS n FROM (${text}) x`, values })).rows[0]!.n;
}

/** A signed generic ticket webhook (`tickets`, case type `support`), as most intake tests receive. */
export function ticketWebhook(secret: string) {
  return {
    name: 'tickets',
    caseType: 'support',
    secrets: [secret],
    signature: { kind: 'hmac-sha256' as const, header: 'X-Signature', encoding: 'hex' as const, prefix: 'sha256=' },
    mapping: { kind: 'generic' as const, id: { pointer: '/ticket/id' }, title: '/ticket/subject', body: '/ticket/description', customer: '/ticket/org' },
    maxBodyBytes: 4096,
  };
}
