/**
 * Fixtures for the intake tests: a migrated database and broker prefix of the test file's own,
 * and a REAL intake (plus the gate, as in one fleet node) serving HTTP in this process via
 * runService on a free port. The outbox relay is off so the tests read the outbox rows intake
 * committed (the relay's publishing is tested with the bus).
 */
import amqplib from 'amqplib';
import { ImapFlow } from 'imapflow';
import { sha256Hex } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import { deleteTopology, loadTopology } from '@everdict/bus';
import { startGate } from '@everdict/gate';
import { openSubstrate } from '@everdict/host';
import type { Substrate } from '@everdict/host';
import { startIntake } from '@everdict/intake';
import type { IntakeMailbox, IntakeOptions, IntakeWebhookSource, RunningIntake } from '@everdict/intake';
import { runService } from '@everdict/service-kit';
import type { RunningService, ServiceContext } from '@everdict/service-kit';
import { createPgDb, migrate } from '@everdict/store';
import type { Db } from '@everdict/store';
import { TEST_AMQP_URL, amqpPrefix, freshDatabase } from '@everdict/testkit';
import type { DovecotServer } from '../../libs/intake-sources/test/dovecot.js';

export const TOKENS = {
  acme: 'acme-agent-token-01',
  globex: 'globex-agent-token-02',
  olga: 'operator-olga-token-03',
  nobody: 'nobody-token-04',
} as const;

/** A principal's `tokenHash` in the fleet config for `token`. */
export const tokenHash = (token: string): string => `sha256:${sha256Hex(token)}`;

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
      acme: { tokenHash: tokenHash(TOKENS.acme), roles: ['customer'], customers: ['acme'] },
      globex: { tokenHash: tokenHash(TOKENS.globex), roles: ['customer'], customers: ['globex'] },
      // No `customers`: every customer.
      olga: { tokenHash: tokenHash(TOKENS.olga), roles: ['operator', 'finance'] },
      nobody: { tokenHash: tokenHash(TOKENS.nobody), roles: [], customers: [] },
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

/**
 * A service named intake under runService in this process, on a free port, over a substrate on
 * `databaseUrl` and the broker `prefix` with the outbox relay off; `compose` starts its parts.
 */
async function serveInProcess(databaseUrl: string, prefix: string, poolSize: number, compose: (ctx: ServiceContext, substrate: Substrate) => Promise<void>): Promise<RunningService> {
  return runService({
    name: 'intake',
    port: 0,
    env: { DATABASE_URL: databaseUrl, AMQP_URL: TEST_AMQP_URL, LOG_LEVEL: 'error' },
    signals: [],
    exit: () => undefined,
    async start(ctx) {
      await compose(ctx, await openSubstrate(ctx, { databaseUrl, amqpUrl: TEST_AMQP_URL, amqpPrefix: prefix, relay: false, poolSize }));
    },
  });
}

/** A database, a prefix and one fleet node running intake and gate; `close` removes all of it. */
export async function startFixture(label: string, opts: IntakeOptions = {}): Promise<IntakeFixture> {
  const database = await freshDatabase(label);
  const prefix = amqpPrefix(label);
  const db = createPgDb(database.url, { max: 4 });
  await migrate(db);
  let intake: RunningIntake | undefined;
  let substrate: Substrate | undefined;
  const service = await serveInProcess(database.url, prefix, 12, async (ctx, s) => {
    substrate = s;
    await startGate(ctx, s, fleetConfig());
    intake = await startIntake(ctx, s, fleetConfig(), { databaseUrl: database.url, amqpUrl: TEST_AMQP_URL, ...opts });
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
      await deletePrefixTopology(prefix);
      await database.drop();
    },
  };
}

/** Deletes the exchanges and queues a test's broker prefix declared. */
export async function deletePrefixTopology(prefix: string): Promise<void> {
  const conn = await amqplib.connect(TEST_AMQP_URL);
  try {
    const ch = await conn.createChannel();
    await deleteTopology(ch, loadTopology({ prefix }));
    await ch.close();
  } finally {
    await conn.close();
  }
}

/**
 * Intake alone under runService on a free port, on another fixture's database and broker prefix
 * (the turns fixture whose worker answers the cases), relay off: the worker's relay publishes
 * intake's outbox rows. `opts` are intake's options but the database URL; the mailbox lock retry,
 * the monitors' backoff and the channel tick default to a test's pace (200 ms).
 */
export async function runIntakeOn(fx: { readonly dbUrl: string; readonly prefix: string }, config: FleetConfig, opts: Omit<IntakeOptions, 'databaseUrl'>): Promise<{ service: RunningService; url: string }> {
  const service = await serveInProcess(fx.dbUrl, fx.prefix, 8, async (ctx, substrate) => {
    await startIntake(ctx, substrate, config, { databaseUrl: fx.dbUrl, mailboxLockRetryMs: 200, mailboxMonitorOptions: { backoff: { baseMs: 50, maxMs: 200 } }, channelIntervalMs: 200, ...opts });
  });
  return { service, url: `http://127.0.0.1:${service.port}` };
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

/** How the ticket-comment webhooks of the channel tests sign: HMAC-SHA256, hex, in X-Signature. */
export const COMMENT_SIGNATURE = { kind: 'hmac-sha256' as const, header: 'x-signature' };

/**
 * A signed ticket-comment webhook `tickets` opening `support` cases for acme: the ticket id is
 * the origin (so a later comment threads onto its case), `/comment` the text; `event` maps the
 * ticket's state (closing), `replyUrl` is where answers are POSTed.
 */
export function commentWebhook(secret: string, o: { event?: string; replyUrl?: string } = {}): IntakeWebhookSource {
  return {
    name: 'tickets',
    caseType: 'support',
    secrets: [secret],
    signature: COMMENT_SIGNATURE,
    customer: 'acme',
    mapping: { kind: 'generic', id: { pointer: '/ticket/id' }, title: '/ticket/title', body: '/comment', ...(o.event ? { event: o.event } : {}) },
    ...(o.replyUrl ? { replyUrl: o.replyUrl } : {}),
  };
}

// ------------------------------------------------------------------------------- mail (Dovecot)

/** A connected IMAP client of the test Dovecot's one user; log it out when done. */
export async function imapClient(server: DovecotServer): Promise<ImapFlow> {
  const c = new ImapFlow({ host: server.host, port: server.port, secure: false, auth: { user: server.user, pass: server.pass }, logger: false });
  c.on('error', () => undefined);
  await c.connect();
  return c;
}

export async function createMailFolder(server: DovecotServer, folder: string): Promise<void> {
  const c = await imapClient(server);
  await c.mailboxCreate(folder);
  await c.logout();
}

/** Appends one message (its lines, joined with CRLF) to `folder`. */
export async function appendMail(server: DovecotServer, folder: string, lines: readonly string[]): Promise<void> {
  const c = await imapClient(server);
  try {
    if ((await c.append(folder, lines.join('\r\n'))) === false) throw new Error('APPEND failed');
  } finally {
    await c.logout().catch(() => c.close());
  }
}

/** The lines of a plain-text mail from the customer to `to`, Message-ID `<id@example.org>`. */
export function customerMail(to: string, id: string, subject: string, body: string, headers: readonly string[] = []): string[] {
  return [`From: Customer <customer@example.org>`, `To: ${to}`, `Subject: ${subject}`, `Message-ID: <${id}@example.org>`, ...headers, 'MIME-Version: 1.0', 'Content-Type: text/plain; charset=utf-8', '', body, ''];
}

export interface FolderMail {
  readonly messageId: string;
  readonly inReplyTo: string;
  /** Everything after the header block, as stored. */
  readonly text: string;
}

/** Every mail in `folder`, oldest first; none while the folder does not exist. */
export async function mailsIn(server: DovecotServer, folder: string): Promise<FolderMail[]> {
  const c = await imapClient(server);
  try {
    if (!(await c.list()).some((f) => f.path === folder)) return [];
    const lock = await c.getMailboxLock(folder);
    const out: FolderMail[] = [];
    try {
      for await (const m of c.fetch('1:*', { envelope: true, source: true })) {
        out.push({ messageId: m.envelope?.messageId ?? '', inReplyTo: m.envelope?.inReplyTo ?? '', text: (m.source?.toString('utf8') ?? '').split('\r\n\r\n').slice(1).join('\r\n\r\n') });
      }
    } finally {
      lock.release();
    }
    return out;
  } finally {
    await c.logout().catch(() => c.close());
  }
}

/** A polled mailbox of the test Dovecot opening `support` cases for customer acme. */
export function testMailbox(server: DovecotServer, account: string, mailbox: string, extra: Partial<IntakeMailbox> = {}): IntakeMailbox {
  return { account, mailbox, host: server.host, port: server.port, secure: false, user: server.user, pass: server.pass, caseType: 'support', customer: 'acme', startAt: 'all', wait: 'poll', pollIntervalMs: 200, ...extra };
}
