/**
 * Mailbox monitors for intake: a Postgres MailboxCursorStore (table mailbox_cursors) and one
 * MailboxMonitor per configured mailbox ACROSS replicas. Each replica tries a session-level
 * advisory lock per mailbox on a dedicated connection; the holder runs the monitor, the others
 * retry. Should the holder's connection die, Postgres releases the lock and the monitor is
 * stopped here, so at most briefly two monitors overlap — which the sink's origin-key dedup
 * keeps correct (a wasted fetch, never a second case).
 */
import pg from 'pg';
import { MailboxMonitor, mailboxKey } from '@everdict/intake-sources';
import type { ArrivalSink, MailboxCursor, MailboxCursorStore, MailboxMonitorOptions } from '@everdict/intake-sources';
import { loadMailboxCursor, saveMailboxCursor } from '@everdict/store';
import type { Queryable } from '@everdict/store';
import type { Logger } from 'pino';

function pgCursorStore(db: Queryable): MailboxCursorStore {
  return {
    load: (key) => loadMailboxCursor(db, key),
    save: (key, cursor: MailboxCursor) => saveMailboxCursor(db, key, cursor),
  };
}

/** One configured mailbox: the monitor's connection options (credentials resolved) and its case type. */
export interface IntakeMailbox {
  readonly account: string;
  readonly mailbox?: string;
  readonly host: string;
  readonly port: number;
  readonly secure?: boolean;
  readonly user: string;
  readonly pass: string;
  readonly caseType: string;
  readonly customer?: string;
  readonly startAt?: 'new' | 'all';
  readonly wait?: 'auto' | 'idle' | 'poll';
  readonly pollIntervalMs?: number;
  readonly tls?: MailboxMonitorOptions['tls'];
  /** Where the customer's answer is delivered by IMAP APPEND (channels.ts; default `Sent`). */
  readonly replyFolder?: string;
}

interface MailboxSupervisorDeps {
  readonly databaseUrl: string;
  readonly db: Queryable;
  readonly sinkFor: (m: IntakeMailbox) => ArrivalSink;
  readonly logger: Logger;
  /** How often a replica without the lock tries again (default 5000 ms). */
  readonly lockRetryMs?: number;
  /** Extra monitor options (tests: backoff, poll interval). */
  readonly monitorOptions?: Partial<MailboxMonitorOptions>;
}

/** The advisory lock key of a mailbox: stable across replicas and restarts. */
function mailboxLockSql(key: string): { text: string; values: string[] } {
  return { text: `SELECT pg_try_advisory_lock(hashtext('everdict.mailbox'), hashtext($1::text)) AS locked`, values: [key] };
}

export class MailboxSupervisor {
  private stopped = false;
  private readonly running = new Map<string, { monitor: MailboxMonitor; client: pg.Client }>();
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(private readonly mailboxes: readonly IntakeMailbox[], private readonly deps: MailboxSupervisorDeps) {}

  start(): void {
    for (const m of this.mailboxes) void this.attempt(m);
  }

  /** Mailbox keys this replica currently monitors. */
  held(): string[] {
    return [...this.running.keys()];
  }

  private retryLater(m: IntakeMailbox): void {
    if (this.stopped) return;
    const t = setTimeout(() => {
      this.timers.delete(t);
      void this.attempt(m);
    }, this.deps.lockRetryMs ?? 5000);
    this.timers.add(t);
  }

  private async attempt(m: IntakeMailbox): Promise<void> {
    if (this.stopped) return;
    const key = mailboxKey(m.account, m.mailbox ?? 'INBOX');
    const client = new pg.Client({ connectionString: this.deps.databaseUrl, application_name: 'everdict-intake-mailbox-lock' });
    client.on('error', () => undefined); // surfaced through 'end' below
    try {
      await client.connect();
      const locked = (await client.query<{ locked: boolean }>(mailboxLockSql(key))).rows[0]?.locked === true;
      if (!locked || this.stopped) {
        await client.end().catch(() => undefined);
        return this.retryLater(m);
      }
    } catch (err) {
      this.deps.logger.warn({ mailbox: key, err: (err as Error).message }, 'mailbox lock connection failed; retrying');
      await client.end().catch(() => undefined);
      return this.retryLater(m);
    }
    const monitor = new MailboxMonitor({
      account: m.account,
      mailbox: m.mailbox ?? 'INBOX',
      host: m.host,
      port: m.port,
      ...(m.secure !== undefined ? { secure: m.secure } : {}),
      ...(m.tls ? { tls: m.tls } : {}),
      auth: { user: m.user, pass: m.pass },
      ...(m.customer !== undefined ? { customer: m.customer } : {}),
      ...(m.startAt ? { startAt: m.startAt } : {}),
      ...(m.wait ? { wait: m.wait } : {}),
      ...(m.pollIntervalMs ? { pollIntervalMs: m.pollIntervalMs } : {}),
      cursorStore: pgCursorStore(this.deps.db),
      sink: this.deps.sinkFor(m),
      logger: this.deps.logger,
      hooks: {
        onAlert: (a) => this.deps.logger.warn({ alert: a }, 'mailbox alert'),
      },
      ...this.deps.monitorOptions,
    });
    this.running.set(key, { monitor, client });
    this.deps.logger.info({ mailbox: key }, 'mailbox monitor started (advisory lock held)');
    // Losing the session loses the lock: stop monitoring and compete for it again.
    client.once('end', () => {
      const r = this.running.get(key);
      if (r?.client !== client) return;
      this.running.delete(key);
      void r.monitor.stop().finally(() => {
        this.deps.logger.warn({ mailbox: key }, 'mailbox lock session ended; monitor stopped');
        this.retryLater(m);
      });
    });
    monitor.start();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    const all = [...this.running.values()];
    this.running.clear();
    await Promise.all(
      all.map(async (r) => {
        await r.monitor.stop();
        await r.client.end().catch(() => undefined);
      }),
    );
  }
}
