/**
 * The mailbox monitor: one IMAP mailbox → arrivals (§11.6, issue 6).
 *
 * A session connects, EXAMINEs the mailbox (read-only: the monitor never changes flags or moves
 * mail), resumes from the stored cursor (cursor.ts), ingests every message above it in UID
 * order, then waits — IDLE when the server offers it, polling otherwise — and ingests again.
 * For each message: fetch → parse → normalise → `ArrivalSink.open` → only then the cursor is
 * saved. A lost connection ends the session; the monitor reconnects after an exponential,
 * jittered backoff (backoff.ts) that resets once a session has selected the mailbox again.
 *
 * Logs and hooks carry the mailbox key, UIDs, case ids and error codes only: never mail
 * content, addresses or credentials.
 */
import { ImapFlow } from 'imapflow';
import type { Clock } from '@everdict/contracts';
import { EverdictError, systemClock } from '@everdict/contracts';
import type { ArrivalSink, NormalisedArrival } from '../arrival.js';
import { DEFAULT_BACKOFF, backoffDelay } from '../backoff.js';
import type { BackoffPolicy, RandomSource } from '../backoff.js';
import { mailboxKey } from '../origin-key.js';
import { advanceCursor, planResume, selectUids } from './cursor.js';
import type { MailboxCursor, MailboxCursorStore, SelectedMailbox, StartAt } from './cursor.js';
import { normaliseMail, parseMail, parsedFields, sha256OfBytes } from './normalise.js';
import type { ParsedMailFields } from './normalise.js';

/** How the monitor learns about new mail. `auto` = IDLE if the server advertises it, else poll. */
export type WaitMode = 'auto' | 'idle' | 'poll';

export type MailboxAlert =
  | { kind: 'uidvalidity_changed'; mailbox: string; previousUidValidity: number; uidValidity: number }
  | { kind: 'uid_regressed'; mailbox: string; uidValidity: number; lastUid: number; uidNext: number };

export type MailboxConnectionEvent =
  | { kind: 'connected'; mailbox: string; idle: boolean }
  | { kind: 'disconnected'; mailbox: string; errorCode: string; reconnectAttempt: number; delayMs: number };

export interface MailboxArrivalEvent {
  mailbox: string;
  uidValidity: number;
  uid: number;
  originKey: string;
  caseId: string;
  created: boolean;
}

/** Hooks for alerts and metrics. They must not throw; a throw is logged and ignored. */
export interface MailboxMonitorHooks {
  onAlert?(alert: MailboxAlert): void;
  onConnection?(event: MailboxConnectionEvent): void;
  onArrival?(event: MailboxArrivalEvent): void;
}

/** The pino-compatible subset the monitor logs through. */
export interface MonitorLogger {
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
  error(obj: Record<string, unknown>, msg: string): void;
}

const silentLogger: MonitorLogger = { info: () => {}, warn: () => {}, error: () => {} };

/** Sleeps `ms`, resolving early (not rejecting) when `signal` aborts. */
export type Sleep = (ms: number, signal: AbortSignal) => Promise<void>;

const realSleep: Sleep = (ms, signal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });

export interface MailboxMonitorOptions {
  /**
   * Stable operator-chosen name of the account (e.g. `support@example.com`). It is part of
   * every origin key and cursor key, so changing it re-ingests; it is not the login.
   */
  account: string;
  /** Mailbox path. Default `INBOX`. */
  mailbox?: string;
  host: string;
  port: number;
  /** Implicit TLS. Default: true when port is 993. Without it the server's STARTTLS is used when offered. */
  secure?: boolean;
  auth: { user: string; pass: string };
  /** Extra TLS options passed to Node (e.g. a private CA). */
  tls?: { rejectUnauthorized?: boolean; ca?: string | string[]; servername?: string };
  /** Customer every arrival from this mailbox belongs to. Default: none (intake resolves it). */
  customer?: string;
  cursorStore: MailboxCursorStore;
  sink: ArrivalSink;
  /** Default `auto`. */
  wait?: WaitMode;
  /** Poll interval when not using IDLE, ms. Default 60000. */
  pollIntervalMs?: number;
  /** IDLE is re-issued after this long even without news (RFC 2177 asks for < 29 min), ms. Default 240000. */
  idleRestartMs?: number;
  /**
   * The mailbox is SELECTed again after this long, at the end of the wait in progress, ms.
   * Default 1800000 (30 min). A mailbox deleted and rebuilt under a live session (a migration)
   * can leave the server answering that session from the old, vanished mailbox (Dovecot then
   * answers every command OK with an untagged "NO Internal error"), and STATUS on the selected
   * mailbox reports the same stale view; only a new SELECT sees the new UIDVALIDITY.
   */
  reselectMs?: number;
  /** A never-seen mailbox: ingest only new mail (`new`) or also what is already there (`all`). Default `new`. */
  startAt?: StartAt;
  /** Slack before the watermark when re-scanning after a re-baseline (IMAP SINCE has day granularity), ms. Default 86400000. */
  rescanMarginMs?: number;
  /** Larger messages are fetched up to this size and marked truncated. Default 26214400 (25 MiB). */
  maxMessageBytes?: number;
  /** Reconnect backoff. Default {baseMs: 1000, maxMs: 60000, factor: 2}. */
  backoff?: Partial<BackoffPolicy>;
  /** TCP+TLS connect budget, ms. Default 30000. */
  connectTimeoutMs?: number;
  hooks?: MailboxMonitorHooks;
  logger?: MonitorLogger;
  /** Stamps mails without INTERNALDATE and the first baseline. Default: system clock. */
  clock?: Clock;
  /** Jitter source. Default Math.random. */
  random?: RandomSource;
  /** Backoff sleeper. Default: setTimeout. */
  sleep?: Sleep;
}

/** A session failure the monitor recovers from by reconnecting. */
class MailboxSessionError extends EverdictError {
  constructor(code: string, mailbox: string, message: string, cause?: unknown) {
    super(code, `${mailbox}: ${message}`, { retryable: true, cause, details: { mailbox } });
  }
}

/** A safe, short description of any error: its code and name, never its payload. */
function imapErrorCode(err: unknown): string {
  if (err !== null && typeof err === 'object') {
    const e = err as { code?: unknown; name?: unknown; authenticationFailed?: unknown };
    if (e.authenticationFailed === true) return 'AUTHENTICATIONFAILED';
    if (typeof e.code === 'string' && e.code.length > 0) return e.code;
    if (typeof e.name === 'string' && e.name.length > 0) return e.name;
  }
  return 'unknown';
}

type ResolvedOptions = Required<Omit<MailboxMonitorOptions, 'customer' | 'tls' | 'secure' | 'backoff'>> & {
  customer: string | undefined;
  tls: MailboxMonitorOptions['tls'];
  secure: boolean;
  backoff: BackoffPolicy;
};

function resolveOptions(o: MailboxMonitorOptions): ResolvedOptions {
  const positive = (name: string, v: number | undefined, dflt: number): number => {
    const value = v ?? dflt;
    if (!Number.isFinite(value) || value <= 0) throw new EverdictError('invalid_config', `mailbox monitor: ${name} must be a positive number`, { details: { path: name } });
    return value;
  };
  if (!Number.isInteger(o.port) || o.port < 1 || o.port > 65535) throw new EverdictError('invalid_config', 'mailbox monitor: port must be 1-65535', { details: { path: 'port' } });
  if (o.host.trim().length === 0) throw new EverdictError('invalid_config', 'mailbox monitor: host must not be empty', { details: { path: 'host' } });
  if (o.account.trim().length === 0) throw new EverdictError('invalid_config', 'mailbox monitor: account must not be empty', { details: { path: 'account' } });
  return {
    account: o.account,
    mailbox: o.mailbox ?? 'INBOX',
    host: o.host,
    port: o.port,
    secure: o.secure ?? o.port === 993,
    auth: o.auth,
    tls: o.tls,
    customer: o.customer,
    cursorStore: o.cursorStore,
    sink: o.sink,
    wait: o.wait ?? 'auto',
    pollIntervalMs: positive('pollIntervalMs', o.pollIntervalMs, 60_000),
    idleRestartMs: positive('idleRestartMs', o.idleRestartMs, 240_000),
    reselectMs: positive('reselectMs', o.reselectMs, 1_800_000),
    startAt: o.startAt ?? 'new',
    rescanMarginMs: o.rescanMarginMs ?? 86_400_000,
    maxMessageBytes: positive('maxMessageBytes', o.maxMessageBytes, 25 * 1024 * 1024),
    backoff: { ...DEFAULT_BACKOFF, ...o.backoff },
    connectTimeoutMs: positive('connectTimeoutMs', o.connectTimeoutMs, 30_000),
    hooks: o.hooks ?? {},
    logger: o.logger ?? silentLogger,
    clock: o.clock ?? systemClock,
    random: o.random ?? Math.random,
    sleep: o.sleep ?? realSleep,
  };
}

export class MailboxMonitor {
  /** The cursor key of this mailbox: `<account>/<mailbox>`. */
  readonly key: string;
  private readonly o: ResolvedOptions;
  private readonly stopSignal = new AbortController();
  private loop: Promise<void> | null = null;
  private client: ImapFlow | null = null;

  constructor(options: MailboxMonitorOptions) {
    this.o = resolveOptions(options);
    this.key = mailboxKey(this.o.account, this.o.mailbox);
  }

  /** Starts the monitor in the background. Calling it twice is a no-op. */
  start(): void {
    if (this.loop !== null) return;
    if (this.stopSignal.signal.aborted) throw new EverdictError('monitor_stopped', `${this.key}: a stopped monitor cannot be restarted; create a new one`);
    // run() handles every session failure itself; reaching this catch is a programming error
    // (e.g. a random source outside [0, 1)), and the monitor has stopped watching.
    this.loop = this.run().catch((err: unknown) => {
      this.o.logger.error({ mailbox: this.key, errorCode: imapErrorCode(err) }, 'mailbox monitor stopped on an internal error');
    });
  }

  /**
   * Stops watching: logs out, and resolves once the loop has exited. An arrival already handed
   * to the sink finishes (its cursor is saved); nothing new is fetched.
   */
  async stop(): Promise<void> {
    this.stopSignal.abort();
    const client = this.client;
    if (client !== null) {
      // LOGOUT breaks IDLE and makes every pending command reject, which ends the session.
      await Promise.race([client.logout().catch(() => undefined), new Promise((r) => setTimeout(r, 2_000).unref())]);
      client.close();
    }
    await this.loop;
  }

  private get stopping(): boolean {
    return this.stopSignal.signal.aborted;
  }

  private async run(): Promise<void> {
    let attempt = 0;
    while (!this.stopping) {
      let code = 'closed';
      try {
        await this.session(() => {
          attempt = 0;
        });
      } catch (err) {
        code = imapErrorCode(err);
        if (!this.stopping) this.o.logger.warn({ mailbox: this.key, errorCode: code }, 'mailbox session ended');
      }
      if (this.stopping) break;
      const delayMs = backoffDelay(attempt, this.o.random, this.o.backoff);
      this.hook(() => this.o.hooks.onConnection?.({ kind: 'disconnected', mailbox: this.key, errorCode: code, reconnectAttempt: attempt, delayMs }));
      attempt += 1;
      await this.o.sleep(delayMs, this.stopSignal.signal);
    }
  }

  private hook(call: () => void): void {
    try {
      call();
    } catch (err) {
      this.o.logger.error({ mailbox: this.key, errorCode: imapErrorCode(err) }, 'mailbox monitor hook threw');
    }
  }

  private newClient(): ImapFlow {
    return new ImapFlow({
      host: this.o.host,
      port: this.o.port,
      secure: this.o.secure,
      auth: { user: this.o.auth.user, pass: this.o.auth.pass },
      ...(this.o.tls === undefined ? {} : { tls: this.o.tls }),
      // imapflow's own logger would write protocol detail; the monitor logs safe ids itself.
      logger: false,
      disableAutoIdle: true,
      connectionTimeout: this.o.connectTimeoutMs,
      // Polling leaves the socket quiet between polls; the watchdog must not fire in between.
      socketTimeout: Math.max(300_000, this.o.pollIntervalMs + 60_000),
    });
  }

  /** One connection's life. Resolves on stop; rejects when the connection is lost or fails. */
  private async session(onSelected: () => void): Promise<void> {
    const client = this.newClient();
    this.client = client;
    let lost: (err: Error) => void = () => {};
    const closed = new Promise<never>((_, reject) => {
      lost = reject;
    });
    closed.catch(() => undefined);
    client.on('error', (err: unknown) => {
      this.o.logger.warn({ mailbox: this.key, errorCode: imapErrorCode(err) }, 'imap connection error');
    });
    client.on('close', () => lost(new MailboxSessionError('mailbox_connection_lost', this.key, 'connection closed')));
    try {
      if (this.stopping) return;
      await client.connect();
      if (this.stopping) return;
      const opened = await client.mailboxOpen(this.o.mailbox, { readOnly: true });
      // Monotonic: the injectable clock stamps mail, it does not pace the session.
      let selectedAt = performance.now();
      let cursor = await this.resume(selectedOf(opened));
      const idle = this.o.wait === 'idle' || (this.o.wait === 'auto' && client.capabilities.has('IDLE'));
      onSelected();
      this.o.logger.info({ mailbox: this.key, uidValidity: cursor.uidValidity, lastUid: cursor.lastUid, idle }, 'mailbox selected');
      this.hook(() => this.o.hooks.onConnection?.({ kind: 'connected', mailbox: this.key, idle }));
      for (;;) {
        // A server may announce a new UIDVALIDITY inside a session; the old UIDs are void then.
        const current = client.mailbox;
        if (current !== false && Number(current.uidValidity) !== cursor.uidValidity) cursor = await this.resume(selectedOf(current));
        cursor = await this.drain(client, cursor);
        if (this.stopping) return;
        await this.waitForNews(client, idle, closed);
        if (this.stopping) return;
        if (performance.now() - selectedAt >= this.o.reselectMs) {
          // The loop's first check compares the UIDVALIDITY this SELECT reports with the cursor's.
          await client.mailboxOpen(this.o.mailbox, { readOnly: true });
          selectedAt = performance.now();
        }
      }
    } finally {
      this.client = null;
      if (!client.isClosed) client.close();
    }
  }

  /** Loads the cursor, decides how to resume, and persists baselines before any ingest. */
  private async resume(selected: SelectedMailbox): Promise<MailboxCursor> {
    const stored = await this.o.cursorStore.load(this.key);
    const decision = planResume(stored, selected, { startAt: this.o.startAt, rescanMarginMs: this.o.rescanMarginMs, now: this.o.clock.now() });
    if (decision.kind === 'continue') return decision.cursor;
    await this.o.cursorStore.save(this.key, decision.cursor);
    if (decision.kind === 'baseline') {
      this.o.logger.info({ mailbox: this.key, uidValidity: decision.cursor.uidValidity, lastUid: decision.cursor.lastUid, startAt: this.o.startAt }, 'mailbox baselined');
      return decision.cursor;
    }
    const prev = decision.previous;
    const alert: MailboxAlert =
      decision.reason === 'uidvalidity_changed'
        ? { kind: 'uidvalidity_changed', mailbox: this.key, previousUidValidity: prev.uidValidity, uidValidity: selected.uidValidity }
        : { kind: 'uid_regressed', mailbox: this.key, uidValidity: selected.uidValidity, lastUid: prev.lastUid, uidNext: selected.uidNext };
    this.o.logger.warn({ ...alert, rescanThroughUid: decision.cursor.rescan?.throughUid ?? 0, rescanSince: decision.cursor.rescan?.since ?? null }, 'mailbox re-baselined');
    this.hook(() => this.o.hooks.onAlert?.(alert));
    return decision.cursor;
  }

  /** Ingests everything above the cursor, repeating until a search finds nothing new. */
  private async drain(client: ImapFlow, start: MailboxCursor): Promise<MailboxCursor> {
    let cursor = start;
    // NOOP makes the server report what arrived since the last command (needed when polling).
    await client.noop();
    for (;;) {
      const found = await uidSearch(client, this.key, `${cursor.lastUid + 1}:*`);
      let eligibleOld: Set<number> | null = null;
      const rescan = cursor.rescan;
      if (rescan !== null && rescan.since !== null && cursor.lastUid < rescan.throughUid) {
        eligibleOld = new Set(await uidSearch(client, this.key, `${cursor.lastUid + 1}:${rescan.throughUid}`, new Date(rescan.since)));
      }
      const actions = selectUids(found, cursor, eligibleOld);
      if (actions.length === 0) return cursor;
      let unsaved = false;
      for (const { uid, action } of actions) {
        if (this.stopping) break;
        if (action === 'pass') {
          // Passed-over UIDs need no durable record: after a crash the same rule passes them again.
          cursor = advanceCursor(cursor, uid, null);
          unsaved = true;
          continue;
        }
        const fetched = await this.fetchArrival(client, cursor.uidValidity, uid);
        if (fetched !== null) {
          const opened = await this.o.sink.open(fetched.arrival);
          cursor = advanceCursor(cursor, uid, fetched.internalDate);
          await this.o.cursorStore.save(this.key, cursor);
          unsaved = false;
          this.o.logger.info({ mailbox: this.key, uidValidity: cursor.uidValidity, uid, caseId: opened.caseId, created: opened.created }, 'mail ingested');
          const event: MailboxArrivalEvent = { mailbox: this.key, uidValidity: cursor.uidValidity, uid, originKey: fetched.arrival.originKey, caseId: opened.caseId, created: opened.created };
          this.hook(() => this.o.hooks.onArrival?.(event));
        } else {
          // Expunged between SEARCH and FETCH: there is nothing left to ingest under this UID.
          cursor = advanceCursor(cursor, uid, null);
          unsaved = true;
        }
      }
      if (unsaved) await this.o.cursorStore.save(this.key, cursor);
      if (this.stopping) return cursor;
    }
  }

  private async fetchArrival(client: ImapFlow, uidValidity: number, uid: number): Promise<{ arrival: NormalisedArrival; internalDate: Date | null } | null> {
    const msg = await client.fetchOne(String(uid), { uid: true, internalDate: true, size: true, source: { maxLength: this.o.maxMessageBytes } }, { uid: true });
    if (msg === false || msg.source === undefined || msg.uid !== uid) return null;
    const source = msg.source;
    const size = msg.size ?? source.length;
    const internalDate = msg.internalDate === undefined ? null : new Date(msg.internalDate);
    let fields: ParsedMailFields;
    try {
      fields = parsedFields(await parseMail(source));
    } catch (err) {
      // An unparseable mail still opens a case (with its raw reference) rather than vanish.
      this.o.logger.warn({ mailbox: this.key, uidValidity, uid, errorCode: imapErrorCode(err) }, 'mail could not be parsed');
      fields = { attachments: [] };
    }
    const arrival = normaliseMail(
      fields,
      {
        account: this.o.account,
        mailbox: this.o.mailbox,
        uidValidity,
        uid,
        internalDate,
        size,
        sourceSha256: sha256OfBytes(source),
        truncated: size > source.length,
        ...(this.o.customer === undefined ? {} : { customer: this.o.customer }),
      },
      this.o.clock.now(),
    );
    return { arrival, internalDate };
  }

  /** Waits for an EXISTS (IDLE), the poll interval, the IDLE restart, stop, or a lost connection (rejects). */
  private async waitForNews(client: ImapFlow, idle: boolean, closed: Promise<never>): Promise<void> {
    let onExists: () => void = () => {};
    let timer: ReturnType<typeof setTimeout> | undefined;
    let onStop: () => void = () => {};
    const woken = new Promise<void>((resolve) => {
      onExists = () => resolve();
      onStop = () => resolve();
      timer = setTimeout(resolve, idle ? this.o.idleRestartMs : this.o.pollIntervalMs);
    });
    client.on('exists', onExists);
    this.stopSignal.signal.addEventListener('abort', onStop, { once: true });
    try {
      // IDLE runs until the next command (the drain's NOOP) breaks it; its own failure is
      // reported through `close` or simply ends the wait early.
      if (idle) void client.idle().catch(() => undefined);
      await Promise.race([woken, closed]);
    } finally {
      clearTimeout(timer);
      client.off('exists', onExists);
      this.stopSignal.signal.removeEventListener('abort', onStop);
    }
  }
}

function selectedOf(m: { uidValidity: bigint; uidNext: number }): SelectedMailbox {
  return { uidValidity: Number(m.uidValidity), uidNext: m.uidNext };
}

async function uidSearch(client: ImapFlow, mailbox: string, range: string, since?: Date): Promise<number[]> {
  const result = await client.search(since === undefined ? { uid: range } : { uid: range, since }, { uid: true });
  if (result === false || result === undefined) throw new MailboxSessionError('mailbox_search_failed', mailbox, 'UID SEARCH failed');
  return result;
}
