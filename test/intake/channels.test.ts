/**
 * Telling the customer, the customer's close and the reopen (issue 13 items 1 and 3) on real
 * processes: a REAL Dovecot IMAP server, a real intake (startIntake under runService in this
 * process: its mailbox monitor, its customer channels and its HTTP API) and a real turn-worker
 * process (`everdict start`, scripted model) whose relay publishes intake's outbox rows.
 *
 * - A mail-opened case whose root finishes: a reply mail appears in the mailbox's reply folder,
 *   In-Reply-To the arrival; the case reads `resolved` only after that delivery is recorded
 *   (`customer_told`), parked `telling_customer` before.
 * - The customer's reply to that mail reopens the case (`case_reopened`): a new root runs to
 *   done, and the customer is told again.
 * - A webhook case: the answer is POSTed to the source's replyUrl (a real HTTP server here),
 *   signed with the source's secret; a failing endpoint keeps the case waiting and is retried.
 * - An API case: a stored notification in the case view; only its requester closes it.
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetConfig } from '@everdict/contracts';
import type { RunningService } from '@everdict/service-kit';
import { signBody } from '@everdict/intake-sources';
import { readinessBudgetMs } from '@everdict/testkit';
import { startDovecot } from '../../libs/intake-sources/test/dovecot.js';
import type { DovecotServer } from '../../libs/intake-sources/test/dovecot.js';
import { closingHint, mailOrigin, replyMail } from '../../services/intake/src/channels.js';
import { reopens } from '../../services/intake/src/threading.js';
import { eventually, say, testConfig, turnsFixture } from '../turns/helpers.js';
import type { TurnsFixture } from '../turns/helpers.js';
import { COMMENT_SIGNATURE, appendMail, commentWebhook, createMailFolder, customerMail, mailsIn, runIntakeOn, testMailbox, tokenHash } from './helpers.js';

const ACCOUNT = 'support@example.com';
const REPLY_FOLDER = 'Answers';
const TOKENS = { acme: 'channels-acme-token-01', other: 'channels-other-token-02' } as const;

let server: DovecotServer;
let fx: TurnsFixture;
let service: RunningService;
let url: string;
let ticketSystem: Server;
let ticketUrl: string;
/** What the ticket system received, and how it answers (500 first, to prove the retry). */
const comments: { headers: Record<string, string | string[] | undefined>; body: string }[] = [];
const ticketAnswers = [500];
const SECRET = 'channels-webhook-secret-0123456789';

const mail = (id: string, subject: string, body: string, headers: string[] = []) => appendMail(server, 'support', customerMail(ACCOUNT, id, subject, body, headers));

/** The mails in the reply folder: their Message-ID, In-Reply-To and text. */
const replies = async (): Promise<{ messageId: string; inReplyTo: string; text: string }[]> => (await mailsIn(server, REPLY_FOLDER)).map((m) => ({ ...m, text: m.text.trim() }));

const caseOf = async (originKey: string) => (await fx.rows<{ id: string }>('SELECT id FROM cases WHERE origin_key = $1', [originKey]))[0]?.id;
const caseRow = async (id: string) => (await fx.rows<{ state: string; state_reason: string | null }>('SELECT state, state_reason FROM cases WHERE id = $1', [id]))[0]!;
const ledgerOf = async (id: string, kind: string) => (await fx.rows<{ body: Record<string, unknown> }>('SELECT body FROM ledger WHERE case_id = $1 AND kind = $2 ORDER BY seq', [id, kind])).map((r) => r.body);
const roots = async (id: string) => fx.rows<{ id: string; state: string }>('SELECT id, state FROM tasks WHERE case_id = $1 AND parent_id IS NULL ORDER BY created_at', [id]);

async function http(method: string, path: string, token: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(`${url}${path}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, ...(method === 'POST' ? { body: '{}' } : {}) });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  server = await startDovecot('intake-channels');
  await createMailFolder(server, 'support');
  const config: FleetConfig = {
    ...testConfig({
      routes: { answers: 'answers.json' },
      profiles: { desk: { version: '1', route: 'answers', prompt: 'You answer support mail.', tools: ['lookup'] } },
      caseTypes: { support: { rootProfile: 'desk', scope: { reads: 'all', writes: [], forbidden: [] } } },
    }),
    principals: {
      acme: { tokenHash: tokenHash(TOKENS.acme), roles: ['customer'], customers: ['acme'] },
      other: { tokenHash: tokenHash(TOKENS.other), roles: ['customer'], customers: ['acme'] },
    },
  };
  ticketSystem = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      comments.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(ticketAnswers.shift() ?? 201, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => ticketSystem.listen(0, '127.0.0.1', r));
  ticketUrl = `http://127.0.0.1:${(ticketSystem.address() as { port: number }).port}/comments`;
  fx = await turnsFixture('intake_channels', config);
  fx.writeScript('answers', [say('Replaced the fuser; the printer prints again.')]);
  await fx.worker('channels');
  ({ service, url } = await runIntakeOn(fx, config, {
    sources: {
      webhooks: [commentWebhook(SECRET, { replyUrl: ticketUrl })],
      mailboxes: [testMailbox(server, ACCOUNT, 'support', { replyFolder: REPLY_FOLDER })],
    },
  }));
}, 60_000 + readinessBudgetMs());
afterAll(async () => {
  await service?.shutdown('test done');
  await fx?.close();
  await server?.destroy();
  await new Promise((r) => ticketSystem?.close(r));
});

describe('customer channels: resolved means the customer was told', () => {
  it('a mail case: a threaded reply mail is delivered, then resolved; the customer’s reply reopens it', async () => {
    await mail('orig-1', 'Printer on fire', 'The printer is on fire.');
    const caseId = await eventually(async () => caseOf('mail:support@example.com/support:mid:orig-1@example.org'), { what: 'the mail opened a case', timeoutMs: 20_000 });
    await eventually(async () => (await caseRow(caseId)).state === 'resolved', { what: 'the case resolved', timeoutMs: 30_000 });

    // The reply mail: in the reply folder, threaded to the arrival, carrying the root's answer.
    const sent = await replies();
    expect(sent).toHaveLength(1);
    expect(sent[0]!.inReplyTo).toBe('<orig-1@example.org>');
    expect(sent[0]!.text).toContain('Replaced the fuser');
    // It says how to close the case (threading.ts: a reply whose first line is CLOSE).
    expect(sent[0]!.text).toContain('Reply CLOSE to close this case.');
    const told = await ledgerOf(caseId, 'customer_told');
    expect(told).toHaveLength(1);
    expect(told[0]).toMatchObject({ channel: 'mail', messageId: sent[0]!.messageId.replace(/[<>]/g, '') });
    // The state chain: the finished root waited to tell the customer; the delivery resolved it.
    const states = (await ledgerOf(caseId, 'case_state')).map((b) => `${String(b['to'])}${b['reason'] ? `/${String(b['reason'])}` : ''}:${String(b['cause'])}`);
    expect(states.slice(-2)).toEqual(['parked/telling_customer:task_done', 'resolved:customer_told']);

    // The customer replies to the platform's mail: the case reopens with a new root.
    await mail('reply-1', 'Re: Printer on fire', 'It is on fire again.', [`In-Reply-To: ${sent[0]!.messageId}`, `References: <orig-1@example.org> ${sent[0]!.messageId}`]);
    await eventually(async () => (await ledgerOf(caseId, 'case_reopened')).length === 1, { what: 'the case reopened', timeoutMs: 20_000 });
    const [first, second] = await roots(caseId);
    expect((await ledgerOf(caseId, 'case_reopened'))[0]).toMatchObject({ fromState: 'resolved', previousRootTaskId: first!.id, rootTaskId: second!.id });
    const objective = (await fx.rows<{ objective: { text: string } }>('SELECT objective FROM tasks WHERE id = $1', [second!.id]))[0]!.objective.text;
    expect(objective).toContain('It is on fire again.');
    expect(objective).toContain('Replaced the fuser');
    await eventually(async () => (await roots(caseId))[1]!.state === 'done', { what: 'the new root ran to done', timeoutMs: 30_000 });
    await eventually(async () => (await caseRow(caseId)).state === 'resolved', { what: 'resolved again', timeoutMs: 30_000 });
    const afterReopen = (await ledgerOf(caseId, 'case_state')).map((b) => String(b['to']));
    expect(afterReopen.slice(afterReopen.lastIndexOf('resolved', -2) + 1)).toContain('running');
    expect(await ledgerOf(caseId, 'customer_told')).toHaveLength(2);
    expect(await replies()).toHaveLength(2);
    expect(await fx.rows('SELECT 1 FROM cases')).toHaveLength(1);
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });

  it('a webhook case: the answer is a signed ticket comment POSTed to the source’s replyUrl; a failed POST is retried', async () => {
    const body = JSON.stringify({ ticket: { id: 'T-9', title: 'VPN down' }, comment: 'The VPN is down.' });
    const opened = await fetch(`${url}/v1/intake/tickets`, { method: 'POST', headers: { 'content-type': 'application/json', ...signBody(COMMENT_SIGNATURE, SECRET, body) }, body });
    expect(opened.status).toBe(201);
    const caseId = ((await opened.json()) as { caseId: string }).caseId;
    await eventually(async () => (await caseRow(caseId)).state === 'resolved', { what: 'the webhook case resolved', timeoutMs: 30_000 });
    // The first POST was refused (500): the case stayed waiting, and the next tick delivered.
    expect(comments).toHaveLength(2);
    const [root] = await roots(caseId);
    for (const c of comments) {
      expect(c.headers['idempotency-key']).toBe(`told.${root!.id}`);
      expect(c.headers['x-signature']).toBe(signBody(COMMENT_SIGNATURE, SECRET, c.body)['x-signature']);
      expect(JSON.parse(c.body)).toMatchObject({ caseId, rootTaskId: root!.id, text: `Replaced the fuser; the printer prints again.\n\n-- \n${closingHint('webhook')}` });
    }
    expect(await ledgerOf(caseId, 'customer_told')).toEqual([{ channel: 'webhook', messageId: `told.${root!.id}`, rootTaskId: root!.id }]);
  });

  it('an API case: a stored notification in the case view; only its requester closes it, once resolved', async () => {
    const created = await fetch(`${url}/v1/cases`, { method: 'POST', headers: { authorization: `Bearer ${TOKENS.acme}`, 'content-type': 'application/json' }, body: JSON.stringify({ caseType: 'support', title: 'Toner low', objective: 'Please order toner.' }) });
    expect(created.status).toBe(201);
    const caseId = ((await created.json()) as { caseId: string }).caseId;
    await eventually(async () => (await caseRow(caseId)).state === 'resolved', { what: 'the API case resolved', timeoutMs: 30_000 });
    const view = await http('GET', `/v1/cases/${caseId}`, TOKENS.acme);
    expect(view.body['notifications']).toEqual([expect.objectContaining({ channel: 'stored', text: 'Replaced the fuser; the printer prints again.' })]);

    expect(await http('POST', `/v1/cases/${caseId}/close`, TOKENS.other)).toMatchObject({ status: 403, body: { error: 'not_requester' } });
    expect((await caseRow(caseId)).state).toBe('resolved');
    expect(await http('POST', `/v1/cases/${caseId}/close`, TOKENS.acme)).toMatchObject({ status: 200, body: { state: 'closed' } });
    expect((await caseRow(caseId)).state).toBe('closed');
    expect(await ledgerOf(caseId, 'case_closed')).toEqual([expect.objectContaining({ by: 'acme' })]);
    expect((await ledgerOf(caseId, 'case_state')).at(-1)).toMatchObject({ from: 'resolved', to: 'closed', cause: 'customer_closed' });
  });
});

describe('customer channels: pure decisions', () => {
  it('reopens a case its customer was answered on (or is about to be), nothing else', () => {
    expect(reopens('resolved', null)).toBe(true);
    expect(reopens('closed', null)).toBe(true);
    expect(reopens('parked', 'telling_customer')).toBe(true);
    expect(reopens('parked', 'question')).toBe(false);
    expect(reopens('running', null)).toBe(false);
    expect(reopens('cancelled', null)).toBe(false);
  });
  it('reads the mailbox from a mail origin key', () => {
    expect(mailOrigin('mail:support@example.com/support:mid:orig-1@example.org')).toBe('support@example.com/support');
    expect(mailOrigin('mail:support@example.com/support:sha256:ab12')).toBe('support@example.com/support');
    expect(mailOrigin('api:x:y')).toBeUndefined();
  });
  it('threads the reply and keeps line breaks out of its headers', () => {
    const raw = replyMail({ from: 'desk@x', to: null, subject: 'Hi\r\nBcc: evil@x', messageId: 'm@x', inReplyTo: 'a@y', references: ['o@y', 'a@y'], text: 'done', date: new Date(0) });
    expect(raw).toContain('In-Reply-To: <a@y>\r\nReferences: <o@y> <a@y>\r\n');
    expect(raw).toContain('Subject: Re: Hi Bcc: evil@x\r\n');
    expect(raw).not.toMatch(/^Bcc:/m);
  });
});
