/**
 * Telling the customer (seed 004 §11.1, §11.3): a case whose current root is done and verified
 * is parked with the reason `telling_customer` until its answer is delivered through the
 * channel the case arrived by; the delivery's record makes it `resolved`.
 *
 * The pending work is the case row itself (state parked · telling_customer, written by the
 * case-state refresh in the unit of work that finished the root), so no delivery is lost: a
 * crashed intake leaves the case pending and any replica picks it up. One delivery per case
 * at a time (a transaction-level advisory lock only this loop takes, before any row lock); the
 * delivery and its record — a `customer_notifications` row, the `customer_told` ledger record
 * and the re-derived state — are one unit of work.
 *
 *   mail     a reply mail to the arrival (In-Reply-To / References its Message-ID), delivered
 *            by IMAP APPEND into the mailbox's `replyFolder` (default `Sent`); its Message-ID is
 *            recorded so the customer's reply to it threads into the case. There is no SMTP
 *            submission here: production sends the same message through SMTP (follow-up).
 *            The Message-ID is derived from the root task id and the folder is searched for it
 *            before appending, so a delivery retried after a crash appends nothing twice.
 *   webhook  a ticket comment: an HTTP POST of the answer (JSON) to the source's `replyUrl`,
 *            signed with the source's first secret under its signature scheme, with an
 *            `Idempotency-Key` derived from the root task id (a retried delivery is the same
 *            comment); any 2xx is the delivery.
 *   stored   an API case (and a schedule case, or a webhook source without `replyUrl`): a
 *            stored notification, shown in the case view; the row is the delivery.
 *
 * Closing: only the customer closes a resolved case, never the platform — the principal that
 * opened it through the API (`closeCase`), or the customer through the channel (threading.ts):
 * a reply mail whose first line is CLOSE, or the ticket closed (a webhook whose event says
 * `closed`). The answer a mail or webhook customer receives ends with how (`closingHint`).
 */
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { ImapFlow } from 'imapflow';
import type { Logger } from 'pino';
import { EverdictError } from '@everdict/contracts';
import { sendError, sendJson } from '@everdict/http-api';
import type { Principal } from '@everdict/http-api';
import { mailboxKey, signBody } from '@everdict/intake-sources';
import { refreshCaseState } from '@everdict/store';
import type { Queryable, Store, UnitOfWork } from '@everdict/store';
import type { IntakeMailbox } from './mailboxes.js';
import type { IntakeWebhookSource } from './sources.js';
import { markCaseClosed, recordSentMessageId } from './threading.js';

/** Largest answer text a notification carries. */
const MAX_TEXT = 16000;
const DEFAULT_REPLY_FOLDER = 'Sent';
const PLATFORM_MAIL_DOMAIN = 'everdict.invalid';

// ------------------------------------------------------------------------------ pure decisions

export type Channel = 'mail' | 'webhook' | 'stored';

/** The channel a case's answer goes out by, from its opening input's source (and whether its webhook source takes replies). */
export function channelFor(source: string, webhookReplies: boolean): Channel {
  if (source === 'mailbox') return 'mail';
  if (source === 'webhook' && webhookReplies) return 'webhook';
  return 'stored';
}

/** `webhook:<source>:<delivery id>` → the webhook source's name. */
export function webhookOrigin(originKey: string): string | undefined {
  return /^webhook:([^:]+):/.exec(originKey)?.[1];
}

/** `mail:<account>/<mailbox>:mid:<Message-ID>` (or `:sha256:<hex>`) → the mailbox key `<account>/<mailbox>`. */
export function mailOrigin(originKey: string): string | undefined {
  return /^mail:(.+?):(?:mid|sha256):/.exec(originKey)?.[1];
}

/** The reply's Message-ID: one per root task, so a retried delivery is the same message. */
export function replyMessageId(rootTaskId: string): string {
  return `told.${rootTaskId}@${PLATFORM_MAIL_DOMAIN}`;
}

/** What the customer is told about closing, under the answer (mail and ticket comment only). */
export function closingHint(channel: Channel): string | null {
  if (channel === 'mail') return 'Reply CLOSE to close this case. Any other reply reopens it with your message.';
  if (channel === 'webhook') return 'Close the ticket to close this case. Any other comment reopens it with your message.';
  return null;
}

/** Header values cannot carry line breaks (a header injection); everything else is kept. */
const headerValue = (v: string) => v.replace(/[\r\n]+/g, ' ').slice(0, 900);

/** The reply mail (RFC 5322), threaded to the arrival. */
export function replyMail(o: { from: string; to: string | null; subject: string; messageId: string; inReplyTo: string | undefined; references: readonly string[]; text: string; date: Date }): string {
  const subject = /^re:/i.test(o.subject) ? o.subject : `Re: ${o.subject}`;
  const lines = [
    `From: ${headerValue(o.from)}`,
    ...(o.to ? [`To: ${headerValue(o.to)}`] : []),
    `Subject: ${headerValue(subject)}`,
    `Message-ID: <${o.messageId}>`,
    ...(o.inReplyTo ? [`In-Reply-To: <${headerValue(o.inReplyTo)}>`] : []),
    ...(o.references.length > 0 ? [`References: ${o.references.map((r) => `<${headerValue(r)}>`).join(' ')}`] : []),
    `Date: ${o.date.toUTCString()}`,
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    'Content-Transfer-Encoding: 8bit',
    '',
    ...o.text.split(/\r?\n/),
    '',
  ];
  return lines.join('\r\n');
}

// ------------------------------------------------------------------------------ SQL

interface Pending {
  readonly case_id: string;
  readonly root_task_id: string;
  readonly title: string;
  readonly source: string | null;
  readonly origin_key: string | null;
  /** The case's first and latest mail from the customer (Message-IDs without brackets). */
  readonly first_received: string | null;
  readonly last_received: string | null;
}

async function pendingCases(q: Queryable, limit: number): Promise<string[]> {
  const r = await q.query<{ id: string }>({
    text: `SELECT id FROM cases WHERE state = 'parked' AND state_reason = 'telling_customer' ORDER BY state_since LIMIT $1`,
    values: [limit],
  });
  return r.rows.map((x) => x.id);
}

/** The case if it still waits to be told, its current root, and how it arrived. */
async function loadPending(uow: UnitOfWork, caseId: string): Promise<Pending | undefined> {
  const r = await uow.query<Pending>({
    text: `SELECT c.id AS case_id, root.id AS root_task_id, c.title, i.source, i.origin_key,
                  (SELECT message_id FROM case_message_ids WHERE case_id = c.id AND direction = 'received' ORDER BY created_at, message_id LIMIT 1) AS first_received,
                  (SELECT message_id FROM case_message_ids WHERE case_id = c.id AND direction = 'received' ORDER BY created_at DESC, message_id DESC LIMIT 1) AS last_received
             FROM cases c
             JOIN LATERAL (SELECT id FROM tasks WHERE case_id = c.id AND parent_id IS NULL ORDER BY created_at DESC, id DESC LIMIT 1) root ON true
             LEFT JOIN LATERAL (SELECT source, origin_key FROM case_inputs WHERE case_id = c.id AND applied_as = 'opened' LIMIT 1) i ON true
            WHERE c.id = $1 AND c.state = 'parked' AND c.state_reason = 'telling_customer'
              AND NOT EXISTS (SELECT 1 FROM customer_notifications n WHERE n.root_task_id = root.id)`,
    values: [caseId],
  });
  return r.rows[0];
}

/** The root's answer: the summary its `task.finished` message carried. */
async function answerText(q: Queryable, caseId: string, rootTaskId: string): Promise<string> {
  const r = await q.query<{ body: Buffer }>({
    text: `SELECT body FROM outbox_messages WHERE case_id = $1 AND type = 'task.finished' ORDER BY seq DESC LIMIT 20`,
    values: [caseId],
  });
  for (const row of r.rows) {
    try {
      const payload = (JSON.parse(row.body.toString('utf8')) as { payload?: { taskId?: string; summary?: string; outcome?: string } }).payload;
      if (payload?.taskId === rootTaskId) return (payload.summary ?? `Your case is ${payload.outcome ?? 'done'}.`).slice(0, MAX_TEXT);
    } catch {
      // Not an envelope this code reads: look further.
    }
  }
  return 'Your case is done.';
}

// ------------------------------------------------------------------------------ adapters

/** POSTs the answer to the webhook source's reply URL; throws unless it answers 2xx. */
async function postComment(w: IntakeWebhookSource & { readonly replyUrl: string }, body: string, idempotencyKey: string): Promise<void> {
  const secret = w.secrets[0];
  if (secret === undefined) throw new EverdictError('channel_unavailable', `webhook source ${w.name} has no secret to sign its reply`, { details: { field: 'secretsEnv' } });
  const timestamp = 'timestamp' in w.signature && w.signature.timestamp !== undefined ? Math.floor(Date.now() / 1000) : undefined;
  const res = await fetch(w.replyUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': idempotencyKey, ...signBody(w.signature, secret, body, timestamp) },
    body,
    signal: AbortSignal.timeout(10_000),
  });
  await res.body?.cancel();
  if (res.status < 200 || res.status > 299) throw new EverdictError('channel_delivery_failed', `webhook source ${w.name}: replyUrl answered ${res.status}`, { details: { field: 'replyUrl' } });
}

/** Appends the reply to the mailbox's reply folder unless a message with its Message-ID is there already. */
async function appendReply(m: IntakeMailbox, raw: string, messageId: string): Promise<void> {
  const folder = m.replyFolder ?? DEFAULT_REPLY_FOLDER;
  const c = new ImapFlow({ host: m.host, port: m.port, secure: m.secure ?? m.port === 993, auth: { user: m.user, pass: m.pass }, logger: false, ...(m.tls ? { tls: m.tls } : {}) });
  c.on('error', () => undefined); // surfaced by the awaited calls
  await c.connect();
  try {
    const exists = (await c.list()).some((f) => f.path === folder);
    if (!exists) await c.mailboxCreate(folder);
    const lock = await c.getMailboxLock(folder);
    try {
      const found = await c.search({ header: { 'message-id': `<${messageId}>` } }, { uid: true });
      if (Array.isArray(found) && found.length > 0) return;
    } finally {
      lock.release();
    }
    if ((await c.append(folder, raw, ['\\Seen'])) === false) throw new EverdictError('channel_delivery_failed', `IMAP APPEND to ${folder} was refused`, { details: { field: 'replyFolder' } });
  } finally {
    await c.logout().catch(() => c.close());
  }
}

// ------------------------------------------------------------------------------ the loop

export interface CustomerChannelsDeps {
  readonly store: Store;
  readonly mailboxes: readonly IntakeMailbox[];
  readonly webhooks?: readonly IntakeWebhookSource[];
  readonly logger: Logger;
  /** How often pending cases are looked for (default 2000 ms). */
  readonly intervalMs?: number;
}

export class CustomerChannels {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly deps: CustomerChannelsDeps) {}

  start(): void {
    const loop = () => {
      if (this.stopped) return;
      this.running = this.tick()
        .then(() => undefined)
        .catch((err: unknown) => this.deps.logger.warn({ err: (err as Error).message }, 'customer channel tick failed'))
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(loop, this.deps.intervalMs ?? 2000);
        });
    };
    loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  /** Delivers to every case waiting to be told; returns how many deliveries it recorded. */
  async tick(): Promise<number> {
    let n = 0;
    for (const caseId of await pendingCases(this.deps.store.db, 20)) {
      try {
        if (await this.deliver(caseId)) n++;
      } catch (err) {
        // Left pending: the next tick tries again. The error names the channel, not the text.
        this.deps.logger.warn({ caseId, err: (err as Error).message }, 'customer notification not delivered; retrying');
      }
    }
    return n;
  }

  private async deliver(caseId: string): Promise<boolean> {
    return this.deps.store.unitOfWork(async (uow) => {
      const locked = await uow.query<{ ok: boolean }>({ text: `SELECT pg_try_advisory_xact_lock(hashtext('everdict.customer_told'), hashtext($1::text)) AS ok`, values: [caseId] });
      if (locked.rows[0]?.ok !== true) return false;
      const p = await loadPending(uow, caseId);
      if (!p) return false;
      const hook = p.source === 'webhook' && p.origin_key ? this.deps.webhooks?.find((w) => w.name === webhookOrigin(p.origin_key!)) : undefined;
      const channel = channelFor(p.source ?? 'api', hook?.replyUrl !== undefined);
      const answer = await answerText(uow, caseId, p.root_task_id);
      const hint = closingHint(channel);
      const text = hint === null ? answer : `${answer}\n\n-- \n${hint}`;
      let messageId: string;
      if (channel === 'mail') {
        const origin = p.origin_key ? mailOrigin(p.origin_key) : undefined;
        const mailbox = origin ? this.deps.mailboxes.find((m) => mailboxKey(m.account, m.mailbox ?? 'INBOX') === origin) : undefined;
        if (!mailbox) throw new EverdictError('channel_unavailable', `no configured mailbox for the case's arrival`, { details: { field: 'mailboxes' } });
        messageId = replyMessageId(p.root_task_id);
        // In reply to the customer's latest mail; References the thread's start and that mail.
        const inReplyTo = p.last_received ?? undefined;
        const references = [...new Set([p.first_received, p.last_received].filter((x): x is string => x !== null))];
        await appendReply(mailbox, replyMail({ from: mailbox.account, to: null, subject: p.title, messageId, inReplyTo, references, text, date: new Date() }), messageId);
        await recordSentMessageId(uow, caseId, messageId);
      } else if (channel === 'webhook' && hook?.replyUrl !== undefined) {
        messageId = `told.${p.root_task_id}`;
        await postComment({ ...hook, replyUrl: hook.replyUrl }, JSON.stringify({ caseId, originKey: p.origin_key, rootTaskId: p.root_task_id, messageId, text }), messageId);
      } else {
        messageId = randomUUID();
      }
      await uow.query({
        text: `INSERT INTO customer_notifications (id, case_id, root_task_id, channel, message_id, text) VALUES ($1, $2, $3, $4, $5, $6)`,
        values: [randomUUID(), caseId, p.root_task_id, channel, messageId, text],
      });
      // The text stays out of the ledger: it names the channel and the message.
      await uow.appendLedger(caseId, { kind: 'customer_told', body: { channel, messageId, rootTaskId: p.root_task_id } });
      await refreshCaseState(uow, caseId, { cause: 'customer_told', taskId: p.root_task_id });
      return true;
    });
  }
}

// ------------------------------------------------------------------------------ closing

/** Who opened the case through the API (null for mail, webhook and schedule cases). */
async function requesterOf(q: Queryable, caseId: string): Promise<string | null> {
  const r = await q.query<{ principal: string | null }>({ text: `SELECT body->>'principal' AS principal FROM ledger WHERE case_id = $1 AND kind = 'case_opened' ORDER BY seq LIMIT 1`, values: [caseId] });
  return r.rows[0]?.principal ?? null;
}

export type CloseOutcome = { readonly closed: true; readonly state: 'closed' } | { readonly closed: false; readonly code: 'not_requester' | 'not_resolved'; readonly state: string };

/**
 * The customer's confirmation closes a resolved case: the requester principal only, and only
 * once the case is resolved (the customer was told). A closed case stays closed until a reply
 * reopens it. Closing twice answers the closed case.
 */
export async function closeCase(store: Store, caseId: string, principal: string): Promise<CloseOutcome> {
  return store.unitOfWork(async (uow) => {
    // The ledger head, then the case row: the lock order of every case-row writer.
    const row = (await uow.query<{ state: string }>({ text: `SELECT c.state FROM ledger_heads h JOIN cases c ON c.id = h.case_id WHERE h.case_id = $1 FOR UPDATE OF h, c`, values: [caseId] })).rows[0];
    if (!row) throw new EverdictError('case_not_found', 'no such case', { details: { field: 'caseId' } });
    if ((await requesterOf(uow, caseId)) !== principal) return { closed: false, code: 'not_requester', state: row.state };
    if (row.state === 'closed') return { closed: true, state: 'closed' };
    if (row.state !== 'resolved') return { closed: false, code: 'not_resolved', state: row.state };
    await markCaseClosed(uow, caseId, principal, 'api');
    return { closed: true, state: 'closed' };
  });
}

/** `POST /v1/cases/:id/close`: 200 with the closed case; 403 for another principal; 409 before it is resolved. */
export async function closeRoute(store: Store, principal: Principal, caseId: string, res: ServerResponse): Promise<void> {
  const r = await closeCase(store, caseId, principal.id);
  if (r.closed) return sendJson(res, 200, { caseId, state: r.state });
  if (r.code === 'not_requester') return sendError(res, 403, 'not_requester', 'only the principal that opened the case closes it');
  return sendError(res, 409, 'not_resolved', `the case is ${r.state}: only a resolved case is closed by its customer`);
}

export interface NotificationView {
  readonly channel: string;
  readonly messageId: string;
  readonly rootTaskId: string;
  readonly text: string;
  readonly deliveredAt: string;
}

/** The answers the customer was told, oldest first (the case view's `notifications`). */
export async function loadNotifications(q: Queryable, caseId: string): Promise<NotificationView[]> {
  const r = await q.query<{ channel: string; message_id: string; root_task_id: string; text: string; delivered_at: Date }>({
    text: `SELECT channel, message_id, root_task_id, text, delivered_at FROM customer_notifications WHERE case_id = $1 ORDER BY delivered_at, id`,
    values: [caseId],
  });
  return r.rows.map((x) => ({ channel: x.channel, messageId: x.message_id, rootTaskId: x.root_task_id, text: x.text, deliveredAt: x.delivered_at.toISOString() }));
}
