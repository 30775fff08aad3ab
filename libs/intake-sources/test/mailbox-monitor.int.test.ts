/**
 * The mailbox monitor against a REAL Dovecot (Debian `dovecot-imapd`), started by this file on
 * a free 127.0.0.1 port with its own config and maildir (test/dovecot.ts). Mail is delivered by
 * APPEND over a second IMAP connection, the way an MTA's delivery shows up to a client.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ImapFlow } from 'imapflow';
import { eventually } from '@everdict/testkit';
import type { MailboxAlert, MailboxArrivalEvent, MailboxConnectionEvent, MailboxCursor, MailboxCursorStore, MailboxMonitorOptions } from '@everdict/intake-sources';
import { InMemoryArrivalSink, InMemoryCursorStore, MailboxMonitor, backoffDelay } from '@everdict/intake-sources';
import { startDovecot } from './dovecot.js';
import type { DovecotServer } from './dovecot.js';

const ACCOUNT = 'support@example.test';
const BACKOFF = { baseMs: 50, maxMs: 400, factor: 2 };
const HALF = () => 0.5;

let server: DovecotServer;

beforeAll(async () => {
  server = await startDovecot('monitor');
});

afterAll(async () => {
  await server?.destroy();
});

async function admin<T>(fn: (c: ImapFlow) => Promise<T>): Promise<T> {
  const c = new ImapFlow({ host: server.host, port: server.port, secure: false, auth: { user: server.user, pass: server.pass }, logger: false });
  c.on('error', () => undefined);
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.logout().catch(() => c.close());
  }
}

function mail(id: string, subject: string, body = `Body of ${id}.`): string {
  return [`From: Customer <customer@example.org>`, `To: ${ACCOUNT}`, `Subject: ${subject}`, `Message-ID: <${id}@example.org>`, 'Date: Mon, 04 May 2026 09:00:00 +0000', 'MIME-Version: 1.0', 'Content-Type: text/plain; charset=utf-8', '', body, ''].join('\r\n');
}

async function deliver(mailbox: string, id: string, subject: string, opts: { body?: string; idate?: Date } = {}): Promise<void> {
  await admin(async (c) => {
    const r = await c.append(mailbox, mail(id, subject, opts.body), [], opts.idate);
    if (r === false) throw new Error(`APPEND to ${mailbox} failed`);
  });
}

async function createMailbox(name: string): Promise<void> {
  await admin((c) => c.mailboxCreate(name));
}

interface Harness {
  monitor: MailboxMonitor;
  alerts: MailboxAlert[];
  connections: MailboxConnectionEvent[];
  arrivals: MailboxArrivalEvent[];
  logs: string[];
}

function monitorFor(mailbox: string, sink: InMemoryArrivalSink, cursorStore: MailboxCursorStore, extra: Partial<MailboxMonitorOptions> = {}): Harness {
  const h: Omit<Harness, 'monitor'> = { alerts: [], connections: [], arrivals: [], logs: [] };
  const log = (level: string) => (obj: Record<string, unknown>, msg: string) => h.logs.push(JSON.stringify({ level, msg, ...obj }));
  const monitor = new MailboxMonitor({
    account: ACCOUNT,
    mailbox,
    host: server.host,
    port: server.port,
    secure: false,
    auth: { user: server.user, pass: server.pass },
    cursorStore,
    sink,
    backoff: BACKOFF,
    random: HALF,
    idleRestartMs: 5_000,
    pollIntervalMs: 200,
    hooks: {
      onAlert: (a) => h.alerts.push(a),
      onConnection: (e) => h.connections.push(e),
      onArrival: (e) => h.arrivals.push(e),
    },
    logger: { info: log('info'), warn: log('warn'), error: log('error') },
    ...extra,
  });
  return { monitor, ...h };
}

const connectedCount = (h: Harness) => h.connections.filter((e) => e.kind === 'connected').length;
const settle = (ms = 400) => new Promise((r) => setTimeout(r, ms));

describe('mailbox monitor on a real Dovecot', () => {
  it('opens one arrival per new mail over IDLE, leaving what was there before the first start', async () => {
    await createMailbox('fresh');
    await deliver('fresh', 'before-start', 'Old news');
    const sink = new InMemoryArrivalSink();
    const h = monitorFor('fresh', sink, new InMemoryCursorStore());
    h.monitor.start();
    try {
      await eventually(() => connectedCount(h) === 1, { what: 'monitor connected' });
      expect(h.connections[0]).toEqual({ kind: 'connected', mailbox: 'support@example.test/fresh', idle: true });
      await deliver('fresh', 'ticket-1', 'Printer on fire', { body: 'SECRET-BODY-MARKER the printer is on fire' });
      await eventually(() => sink.calls.length === 1, { what: 'one arrival' });
      await settle();
      expect(sink.calls).toHaveLength(1);
      const arrival = sink.calls[0];
      expect(arrival).toMatchObject({
        source: 'mailbox',
        originKey: 'mail:support@example.test/fresh:mid:ticket-1@example.org',
        title: 'Printer on fire',
        body: 'SECRET-BODY-MARKER the printer is on fire',
        raw: { kind: 'imap', mailbox: 'fresh', uid: 2, messageId: 'ticket-1@example.org', from: 'customer@example.org', truncated: false },
      });
      expect(h.arrivals).toMatchObject([{ uid: 2, created: true }]);
      // Logs carry ids only: no mail content, no credentials.
      const logs = h.logs.join('\n');
      expect(logs).toContain('mail ingested');
      expect(logs).not.toContain('SECRET-BODY-MARKER');
      expect(logs).not.toContain('Printer on fire');
      expect(logs).not.toContain(server.pass);
    } finally {
      await h.monitor.stop();
    }
  });

  it('polls when told to, and takes the existing mail with startAt=all', async () => {
    await createMailbox('polled');
    await deliver('polled', 'p-1', 'Already there');
    const sink = new InMemoryArrivalSink();
    const h = monitorFor('polled', sink, new InMemoryCursorStore(), { wait: 'poll', startAt: 'all' });
    h.monitor.start();
    try {
      await eventually(() => sink.calls.length === 1, { what: 'existing mail ingested' });
      expect(h.connections[0]).toMatchObject({ kind: 'connected', idle: false });
      await deliver('polled', 'p-2', 'Arrived later');
      await eventually(() => sink.calls.length === 2, { what: 'polled mail ingested' });
      expect(sink.calls.map((a) => a.title)).toEqual(['Already there', 'Arrived later']);
    } finally {
      await h.monitor.stop();
    }
  });

  it('a restarted monitor (new instance, same cursor store) ingests nothing twice', async () => {
    await createMailbox('restart');
    const sink = new InMemoryArrivalSink();
    const cursors = new InMemoryCursorStore();
    const first = monitorFor('restart', sink, cursors, { startAt: 'all' });
    first.monitor.start();
    await deliver('restart', 'r-1', 'One');
    await deliver('restart', 'r-2', 'Two');
    await eventually(() => sink.calls.length === 2, { what: 'two arrivals' });
    await first.monitor.stop();
    expect(await cursors.load(first.monitor.key)).toMatchObject({ lastUid: 2, rescan: null });

    await deliver('restart', 'r-3', 'Three (while stopped)');
    const second = monitorFor('restart', sink, cursors, { startAt: 'all' });
    second.monitor.start();
    try {
      await eventually(() => sink.calls.length === 3, { what: 'mail delivered while stopped' });
      await deliver('restart', 'r-4', 'Four');
      await eventually(() => sink.calls.length === 4, { what: 'mail after restart' });
      await settle();
      // Exactly one sink call per mail: the cursor, not the sink's dedup, kept the restart clean.
      expect(sink.calls.map((a) => a.title)).toEqual(['One', 'Two', 'Three (while stopped)', 'Four']);
      expect(second.arrivals.every((a) => a.created)).toBe(true);
    } finally {
      await second.monitor.stop();
    }
  });

  it('advances the cursor only after the sink resolved: a crash in between re-delivers, the sink dedups', async () => {
    await createMailbox('crashy');
    const sink = new InMemoryArrivalSink();
    const inner = new InMemoryCursorStore();
    let failSaves = 0;
    // Fails the save that follows a sink call, as a process dying right after the case commit would.
    const cursors: MailboxCursorStore = {
      load: (k) => inner.load(k),
      save: async (k: string, c: MailboxCursor) => {
        if (failSaves > 0 && c.lastUid > 0) {
          failSaves -= 1;
          throw new Error('cursor write lost');
        }
        await inner.save(k, c);
      },
    };
    const h = monitorFor('crashy', sink, cursors, { startAt: 'all' });
    h.monitor.start();
    try {
      await eventually(() => connectedCount(h) === 1, { what: 'monitor connected' });
      failSaves = 1;
      sink.failNext = new Error('intake unavailable');
      await deliver('crashy', 'c-1', 'Flaky path');
      // 1st attempt: the sink fails (nothing stored). 2nd: the case opens, the cursor save fails.
      // 3rd: re-delivered, recognised by origin key. Then the cursor moves.
      await eventually(async () => (await inner.load(h.monitor.key))?.lastUid === 1, { what: 'cursor advanced' });
      expect(sink.calls).toHaveLength(2);
      expect(sink.opened()).toHaveLength(1);
      expect(h.arrivals.map((a) => a.created)).toEqual([false]);
      expect(h.connections.filter((e) => e.kind === 'disconnected').map((e) => e.kind === 'disconnected' && e.reconnectAttempt)).toEqual([0, 0]);
    } finally {
      await h.monitor.stop();
    }
  });

  it('re-baselines on a UIDVALIDITY change: alert, no duplicate case for mail already ingested', async () => {
    const old = new Date('2020-01-02T03:04:05.000Z');
    await createMailbox('epoch');
    await deliver('epoch', 'e-old', 'Ancient history', { idate: old });
    const sink = new InMemoryArrivalSink();
    const cursors = new InMemoryCursorStore();
    // Dovecot reports a deleted mailbox to an IDLEing session only at its next command, i.e. at
    // the IDLE restart — by closing the session, or (a race seen about one run in five) by
    // answering every later command from the vanished mailbox with an untagged "NO Internal
    // error", which only a new SELECT ends. Short restart and re-select periods keep this quick;
    // either path must end in the alert.
    const h = monitorFor('epoch', sink, cursors, { startAt: 'new', idleRestartMs: 1_000, reselectMs: 2_000 });
    h.monitor.start();
    try {
      await eventually(() => connectedCount(h) === 1, { what: 'monitor connected' });
      await deliver('epoch', 'e-1', 'First');
      await deliver('epoch', 'e-2', 'Second');
      await eventually(() => sink.calls.length === 2, { what: 'two arrivals' });
      const before = await cursors.load(h.monitor.key);

      // Rebuild the mailbox the way a migration does: same messages, new UIDVALIDITY. It is
      // prepared under another name and renamed into place, so the monitor sees it whole.
      await createMailbox('epoch-new');
      await deliver('epoch-new', 'e-old', 'Ancient history', { idate: old });
      await deliver('epoch-new', 'e-1', 'First');
      await deliver('epoch-new', 'e-2', 'Second');
      await admin(async (c) => {
        await c.mailboxDelete('epoch');
        await c.mailboxRename('epoch-new', 'epoch');
      });

      await eventually(() => h.alerts.length === 1, { what: 'uidvalidity alert' });
      const alert = h.alerts[0];
      expect(alert).toMatchObject({ kind: 'uidvalidity_changed', mailbox: 'support@example.test/epoch', previousUidValidity: before?.uidValidity });
      expect(alert?.kind === 'uidvalidity_changed' && alert.uidValidity).not.toBe(before?.uidValidity);

      await deliver('epoch', 'e-3', 'Third, after the migration');
      await eventually(() => sink.opened().length === 3, { what: 'the new mail opened a case' });
      await settle();
      // The re-scan re-delivered First and Second (recognised by Message-ID), passed over the
      // ancient mail the first baseline had left out, and opened exactly one new case.
      expect(sink.opened().map((a) => a.title)).toEqual(['First', 'Second', 'Third, after the migration']);
      expect(sink.calls.map((a) => a.title)).toEqual(['First', 'Second', 'First', 'Second', 'Third, after the migration']);
      expect(h.arrivals.slice(2).map((a) => [a.uid, a.created])).toEqual([
        [2, false],
        [3, false],
        [4, true],
      ]);
      expect(await cursors.load(h.monitor.key)).toMatchObject({ uidValidity: alert?.kind === 'uidvalidity_changed' ? alert.uidValidity : -1, lastUid: 4, rescan: null });
    } finally {
      await h.monitor.stop();
    }
  });

  it('reconnects with backoff when the server goes away and continues when it is back', async () => {
    await createMailbox('away');
    const sink = new InMemoryArrivalSink();
    const h = monitorFor('away', sink, new InMemoryCursorStore(), { startAt: 'all' });
    h.monitor.start();
    try {
      await deliver('away', 'a-1', 'Before the outage');
      await eventually(() => sink.calls.length === 1, { what: 'first arrival' });

      await server.stop();
      await eventually(() => h.connections.filter((e) => e.kind === 'disconnected').length >= 3, { what: 'reconnect attempts while down' });
      await server.start();
      await eventually(() => connectedCount(h) === 2, { what: 'reconnected' });
      await deliver('away', 'a-2', 'After the outage');
      await eventually(() => sink.calls.length === 2, { what: 'arrival after reconnect' });
      await settle();

      expect(sink.calls.map((a) => a.title)).toEqual(['Before the outage', 'After the outage']);
      const downs = h.connections.filter((e): e is Extract<MailboxConnectionEvent, { kind: 'disconnected' }> => e.kind === 'disconnected');
      // Attempts count up while the server is down and follow the backoff schedule exactly.
      expect(downs.map((d) => d.reconnectAttempt)).toEqual(downs.map((_, i) => i));
      expect(downs.map((d) => d.delayMs)).toEqual(downs.map((_, i) => backoffDelay(i, HALF, BACKOFF)));
      expect(downs.slice(1).some((d) => d.errorCode === 'ECONNREFUSED')).toBe(true);
    } finally {
      await h.monitor.stop();
    }
  });
});
