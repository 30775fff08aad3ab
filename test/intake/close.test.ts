/**
 * Closed by the customer through the channel (issue 13 item 1, seed 004 §11.1): a REAL Dovecot
 * IMAP server, a real intake (startIntake under runService: mailbox monitor, customer channels,
 * HTTP API with a signed webhook source) and a real turn-worker process (scripted model).
 *
 * - A mail case, resolved: the answer mail says "Reply CLOSE to close this case". The customer's
 *   reply whose first own line is `CLOSE` (the thread quoted under it) closes the case — a
 *   `case_closed` ledger record naming the mail channel, the state resolved → closed, no new
 *   root. A later reply with anything else reopens it as before.
 * - A mail case whose customer replies with prose that merely mentions closing: reopened, not
 *   closed.
 * - A webhook case, resolved: a signed delivery naming the same ticket with `state: closed`
 *   closes it (ledger names the webhook channel); its redelivery changes nothing. A delivery
 *   naming another resolved ticket with a new comment reopens that one.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetConfig } from '@everdict/contracts';
import type { RunningService } from '@everdict/service-kit';
import { signBody } from '@everdict/intake-sources';
import type { NormalisedArrival } from '@everdict/intake-sources';
import { readinessBudgetMs } from '@everdict/testkit';
import { startDovecot } from '../../libs/intake-sources/test/dovecot.js';
import type { DovecotServer } from '../../libs/intake-sources/test/dovecot.js';
import { customerClosure } from '../../services/intake/src/threading.js';
import { eventually, say, testConfig, turnsFixture } from '../turns/helpers.js';
import type { TurnsFixture } from '../turns/helpers.js';
import { COMMENT_SIGNATURE, appendMail, commentWebhook, createMailFolder, customerMail, mailsIn, runIntakeOn, testMailbox } from './helpers.js';

const ACCOUNT = 'desk@example.com';
const REPLY_FOLDER = 'Answers';
const SECRET = 'close-webhook-secret-0123456789';

let server: DovecotServer;
let fx: TurnsFixture;
let service: RunningService;
let url: string;

const mail = (id: string, subject: string, body: string, headers: string[] = []) => appendMail(server, 'desk', customerMail(ACCOUNT, id, subject, body, headers));

/** The answer mails in the reply folder that reply to `inReplyTo`. */
const answersTo = async (inReplyTo: string): Promise<{ messageId: string; text: string }[]> =>
  (await mailsIn(server, REPLY_FOLDER)).filter((m) => m.inReplyTo === `<${inReplyTo}>`).map(({ messageId, text }) => ({ messageId, text }));

const caseOf = async (originKey: string) => (await fx.rows<{ id: string }>('SELECT id FROM cases WHERE origin_key = $1', [originKey]))[0]?.id;
const stateOf = async (id: string) => (await fx.rows<{ state: string }>('SELECT state FROM cases WHERE id = $1', [id]))[0]!.state;
const ledgerOf = async (id: string, kind: string) => (await fx.rows<{ body: Record<string, unknown> }>('SELECT body FROM ledger WHERE case_id = $1 AND kind = $2 ORDER BY seq', [id, kind])).map((r) => r.body);
const rootCount = async (id: string) => (await fx.rows('SELECT 1 FROM tasks WHERE case_id = $1 AND parent_id IS NULL', [id])).length;

async function ticket(payload: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const body = JSON.stringify(payload);
  const r = await fetch(`${url}/v1/intake/tickets`, { method: 'POST', headers: { 'content-type': 'application/json', ...signBody(COMMENT_SIGNATURE, SECRET, body) }, body });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

/** A mail case opened and resolved; its arrival's Message-ID and the answer mail. */
async function resolvedMailCase(id: string, subject: string): Promise<{ caseId: string; answer: { messageId: string; text: string } }> {
  await mail(id, subject, `${subject}, please help.`);
  const caseId = await eventually(async () => caseOf(`mail:${ACCOUNT}/desk:mid:${id}@example.org`), { what: `mail ${id} opened a case`, timeoutMs: 20_000 });
  await eventually(async () => (await stateOf(caseId)) === 'resolved', { what: `case of ${id} resolved`, timeoutMs: 30_000 });
  const [answer] = await eventually(async () => {
    const a = await answersTo(`${id}@example.org`);
    return a.length === 1 ? a : undefined;
  }, { what: `the answer to ${id}` });
  return { caseId, answer: answer! };
}

beforeAll(async () => {
  server = await startDovecot('intake-close');
  await createMailFolder(server, 'desk');
  const config: FleetConfig = testConfig({
    routes: { answers: 'answers.json' },
    profiles: { desk: { version: '1', route: 'answers', prompt: 'You answer support mail.', tools: ['lookup'] } },
    caseTypes: { support: { rootProfile: 'desk', scope: { reads: 'all', writes: [], forbidden: [] } } },
  });
  fx = await turnsFixture('intake_close', config);
  fx.writeScript('answers', [say('Reset the password; you can log in again.')]);
  await fx.worker('close');
  ({ service, url } = await runIntakeOn(fx, config, {
    sources: {
      // No replyUrl: the answer is stored; closing by webhook does not depend on how the customer was told.
      webhooks: [commentWebhook(SECRET, { event: '/ticket/state' })],
      mailboxes: [testMailbox(server, ACCOUNT, 'desk', { replyFolder: REPLY_FOLDER })],
    },
  }));
}, 60_000 + readinessBudgetMs());
afterAll(async () => {
  await service?.shutdown('test done');
  await fx?.close();
  await server?.destroy();
});

describe('closed by the customer through the channel', () => {
  it('a reply mail whose first line is CLOSE closes the resolved case; a later reply reopens it', async () => {
    const { caseId, answer } = await resolvedMailCase('lock-1', 'Locked out');
    expect(answer.text).toContain('Reply CLOSE to close this case.');

    await mail('lock-1-close', 'Re: Locked out', ['Close', '', 'On Monday the desk wrote:', '> Reset the password; you can log in again.', '> Reply CLOSE to close this case.'].join('\r\n'), [
      `In-Reply-To: ${answer.messageId}`,
      `References: <lock-1@example.org> ${answer.messageId}`,
    ]);
    await eventually(async () => (await stateOf(caseId)) === 'closed', { what: 'the case closed', timeoutMs: 20_000 });
    expect(await ledgerOf(caseId, 'case_closed')).toEqual([expect.objectContaining({ channel: 'mail', by: 'mailbox:acme', source: 'mailbox', originKey: `mail:${ACCOUNT}/desk:mid:lock-1-close@example.org` })]);
    expect((await ledgerOf(caseId, 'case_state')).at(-1)).toMatchObject({ from: 'resolved', to: 'closed', cause: 'customer_closed' });
    expect(await ledgerOf(caseId, 'case_reopened')).toHaveLength(0);
    expect(await rootCount(caseId)).toBe(1);
    expect((await fx.rows<{ closed_by: string }>('SELECT closed_by FROM cases WHERE id = $1', [caseId]))[0]!.closed_by).toBe('mailbox:acme');

    // Anything else, later, reopens the closed case as before.
    await mail('lock-1-again', 'Re: Locked out', 'Locked out again this morning.', [`In-Reply-To: ${answer.messageId}`]);
    await eventually(async () => (await ledgerOf(caseId, 'case_reopened')).length === 1, { what: 'the closed case reopened', timeoutMs: 20_000 });
    expect((await ledgerOf(caseId, 'case_reopened'))[0]).toMatchObject({ fromState: 'closed' });
    expect(await rootCount(caseId)).toBe(2);
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });

  it('a reply that only talks about closing reopens the case', async () => {
    const { caseId, answer } = await resolvedMailCase('vpn-1', 'VPN slow');
    await mail('vpn-1-reply', 'Re: VPN slow', 'Please do not close this yet, it is still slow.\r\nClose', [`In-Reply-To: ${answer.messageId}`]);
    await eventually(async () => (await ledgerOf(caseId, 'case_reopened')).length === 1, { what: 'the case reopened', timeoutMs: 20_000 });
    expect(await ledgerOf(caseId, 'case_closed')).toHaveLength(0);
  });

  it('a signed ticket webhook naming the case with state closed closes it; another comment reopens', async () => {
    const opened = await ticket({ ticket: { id: 'T-41', title: 'Mail quota full', state: 'open' }, comment: 'My mailbox is full.' });
    expect(opened.status).toBe(201);
    const caseId = String(opened.body['caseId']);
    await eventually(async () => (await stateOf(caseId)) === 'resolved', { what: 'the ticket case resolved', timeoutMs: 30_000 });

    const close = { ticket: { id: 'T-41', title: 'Mail quota full', state: 'closed' }, comment: 'Thanks, closing.' };
    const closed = await ticket(close);
    expect(closed.status, JSON.stringify(closed.body)).toBeLessThan(300);
    expect(closed.body['caseId']).toBe(caseId);
    expect(await stateOf(caseId)).toBe('closed');
    expect(await ledgerOf(caseId, 'case_closed')).toEqual([expect.objectContaining({ channel: 'webhook', by: 'webhook:acme', originKey: 'webhook:tickets:T-41' })]);
    // The same delivery again (at-least-once): nothing more.
    expect((await ticket(close)).body['caseId']).toBe(caseId);
    expect(await ledgerOf(caseId, 'case_closed')).toHaveLength(1);
    expect(await rootCount(caseId)).toBe(1);

    // A resolved ticket that gets a new comment instead: reopened, as before.
    const other = await ticket({ ticket: { id: 'T-42', title: 'Printer jam', state: 'open' }, comment: 'Paper jam.' });
    const otherId = String(other.body['caseId']);
    await eventually(async () => (await stateOf(otherId)) === 'resolved', { what: 'the second ticket resolved', timeoutMs: 30_000 });
    await ticket({ ticket: { id: 'T-42', title: 'Printer jam', state: 'open' }, comment: 'Jammed again.' });
    await eventually(async () => (await ledgerOf(otherId, 'case_reopened')).length === 1, { what: 'the second ticket reopened', timeoutMs: 20_000 });
    expect(await ledgerOf(otherId, 'case_closed')).toHaveLength(0);
    for (const id of [caseId, otherId]) expect(await fx.store.verifyLedger(id)).toMatchObject({ ok: true });
  });
});

describe('closure: pure decision', () => {
  const imapRaw = { kind: 'imap', account: 'a', mailbox: 'm', uidValidity: 1, uid: 1, locator: 'l', references: [], size: 1, sourceSha256: 'x', truncated: false } as unknown as NormalisedArrival['raw'];
  const hook = (event?: string) => ({ kind: 'webhook', source: 's', mapping: 'generic', deliveryId: 'd', bodySha256: 'x', ...(event === undefined ? {} : { event }) }) as NormalisedArrival['raw'];
  it('reads the first own line of a reply mail', () => {
    expect(customerClosure({ raw: imapRaw, body: 'CLOSE' })).toBe('mail');
    expect(customerClosure({ raw: imapRaw, body: '\n  close.  \n\n> Reply CLOSE to close this case.' })).toBe('mail');
    expect(customerClosure({ raw: imapRaw, body: '> CLOSE\nno, keep it open' })).toBeNull();
    expect(customerClosure({ raw: imapRaw, body: 'close it next week please' })).toBeNull();
    expect(customerClosure({ raw: imapRaw, body: '' })).toBeNull();
  });
  it('reads a ticket event that says closed', () => {
    expect(customerClosure({ raw: hook('closed'), body: '' })).toBe('webhook');
    expect(customerClosure({ raw: hook('issues.closed'), body: '' })).toBe('webhook');
    expect(customerClosure({ raw: hook('open'), body: 'closed' })).toBeNull();
    expect(customerClosure({ raw: hook('unclosed'), body: '' })).toBeNull();
    expect(customerClosure({ raw: hook(), body: 'CLOSE' })).toBeNull();
  });
});
