/**
 * Threading (issue 13 item 3) on real processes: a REAL Dovecot IMAP server, intake's mailbox
 * supervisor and webhook handler in this process, and a real turn-worker process (`everdict
 * start`, scripted model) whose relay publishes intake's outbox rows.
 *
 * - A case opened by mail whose root asks a question: a reply mail (In-Reply-To the original)
 *   lands on THAT case, answers its open question and resumes exactly that task to done; a
 *   second case parked on its own question stays parked; no case is opened for the reply.
 * - A webhook naming an existing origin key (a comment on the same ticket) appends to that case
 *   as a new input instead of opening a second; its redelivery appends nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MailboxSupervisor, caseSink } from '@everdict/intake';
import { createWebhookHandler, signBody } from '@everdict/intake-sources';
import type { WebhookHandler } from '@everdict/intake-sources';
import { createLogger } from '@everdict/service-kit';
import { readinessBudgetMs } from '@everdict/testkit';
import { startDovecot } from '../../libs/intake-sources/test/dovecot.js';
import type { DovecotServer } from '../../libs/intake-sources/test/dovecot.js';
import { recordSentMessageId, replyTargets, replyText } from '../../services/intake/src/threading.js';
import { call, eventually, say, testConfig, turnsFixture } from '../turns/helpers.js';
import type { TurnsFixture } from '../turns/helpers.js';
import { COMMENT_SIGNATURE, appendMail, commentWebhook, createMailFolder, customerMail, testMailbox } from './helpers.js';

const ACCOUNT = 'support@example.com';
const QUESTION = { gap: 'which printer', checked: 'the ticket', dependsOn: 'the fix', alternatives: ['x', 'y'], decisionNeeded: 'pick a printer' };
const SECRET = 'threading-webhook-secret-0123456789';

let server: DovecotServer;
let fx: TurnsFixture;
let supervisor: MailboxSupervisor;
let webhooks: WebhookHandler;

const mail = (id: string, subject: string, body: string, headers: string[] = []) => appendMail(server, 'support', customerMail(ACCOUNT, id, subject, body, headers));

const caseOf = async (originKey: string) => (await fx.rows<{ id: string }>('SELECT id FROM cases WHERE origin_key = $1', [originKey]))[0]?.id;
const rootOf = async (caseId: string) => (await fx.rows<{ id: string; state: string; park_reason: string | null }>('SELECT id, state, park_reason FROM tasks WHERE case_id = $1 AND parent_id IS NULL', [caseId]))[0]!;
const countOf = async (text: string, values: unknown[] = []) => (await fx.rows<{ n: number }>(`SELECT count(*)::int AS n FROM (${text}) x`, values))[0]!.n;

beforeAll(async () => {
  server = await startDovecot('intake-threading');
  await createMailFolder(server, 'support');
  fx = await turnsFixture(
    'intake_threading',
    testConfig({
      routes: { asks: 'asks.json' },
      profiles: { desk: { version: '1', route: 'asks', prompt: 'You answer support mail.', tools: ['lookup'] } },
      caseTypes: { support: { rootProfile: 'desk', scope: { reads: 'all', writes: [], forbidden: [] } } },
    }),
  );
  // Turn 0 asks the customer; turn 1 (after the answer) finishes.
  fx.writeScript('asks', [call(['wait', { for: 'question', reason: 'need the printer', question: QUESTION }]), say('fixed the chosen printer')]);
  await fx.worker('threading');
  const sink = caseSink({ store: fx.store, fleet: () => fx.config, caseType: 'support', customer: 'acme' });
  supervisor = new MailboxSupervisor([testMailbox(server, ACCOUNT, 'support')], { databaseUrl: fx.dbUrl, db: fx.db, sinkFor: () => sink, logger: createLogger({ service: 'threading-test', level: 'error' }), lockRetryMs: 200, monitorOptions: { backoff: { baseMs: 50, maxMs: 200 } } });
  supervisor.start();
  webhooks = createWebhookHandler({
    sources: [commentWebhook(SECRET)],
    sink,
  });
}, 60_000 + readinessBudgetMs());
afterAll(async () => {
  await supervisor?.stop();
  await fx?.close();
  await server?.destroy();
});

describe('threading: a reply appends to its case', () => {
  it('a reply mail answers the case’s open question and resumes exactly that task; no second case is opened', async () => {
    await mail('orig-1', 'Printer on fire', 'The printer is on fire.');
    await mail('other-1', 'Scanner jammed', 'The scanner is jammed.');
    const first = await eventually(async () => caseOf('mail:support@example.com/support:mid:orig-1@example.org'), { what: 'the first mail opened a case', timeoutMs: 20_000 });
    const other = await eventually(async () => caseOf('mail:support@example.com/support:mid:other-1@example.org'), { what: 'the second mail opened a case', timeoutMs: 20_000 });
    await eventually(async () => (await rootOf(first)).park_reason === 'question', { what: 'first root asked', timeoutMs: 20_000 });
    await eventually(async () => (await rootOf(other)).park_reason === 'question', { what: 'second root asked', timeoutMs: 20_000 });
    const casesBefore = await countOf('SELECT 1 FROM cases');

    await mail('reply-1', 'Re: Printer on fire', ['Take printer x, please.', '', 'On Tue, Customer wrote:', '> The printer is on fire.'].join('\r\n'), ['In-Reply-To: <orig-1@example.org>', 'References: <orig-1@example.org>']);

    await eventually(async () => (await rootOf(first)).state === 'done', { what: 'the answered task ran to done', timeoutMs: 30_000 });
    const q = (await fx.rows<{ answer: string; answered_by: string }>('SELECT answer, answered_by FROM questions WHERE case_id = $1', [first]))[0]!;
    expect(q).toEqual({ answer: 'Take printer x, please.', answered_by: 'mailbox:acme' });
    const inputs = await fx.rows<{ applied_as: string; origin_key: string }>('SELECT applied_as, origin_key FROM case_inputs WHERE case_id = $1 ORDER BY created_at', [first]);
    expect(inputs).toEqual([
      { applied_as: 'opened', origin_key: 'mail:support@example.com/support:mid:orig-1@example.org' },
      { applied_as: 'answered', origin_key: 'mail:support@example.com/support:mid:reply-1@example.org' },
    ]);
    expect(await countOf("SELECT 1 FROM ledger WHERE case_id = $1 AND kind = 'answer_submitted' AND body->>'threaded' = 'true'", [first])).toBe(1);
    expect(await countOf("SELECT 1 FROM outbox_messages WHERE case_id = $1 AND type = 'question.answered'", [first])).toBe(1);
    // No case for the reply; the other case was not woken by it.
    await new Promise((r) => setTimeout(r, 800)); // more polls: nothing more may open
    expect(await countOf('SELECT 1 FROM cases')).toBe(casesBefore);
    expect(await caseOf('mail:support@example.com/support:mid:reply-1@example.org')).toBeUndefined();
    expect(await rootOf(other)).toMatchObject({ state: 'parked', park_reason: 'question' });
    expect(await fx.store.verifyLedger(first)).toMatchObject({ ok: true });

    // A reply naming only the Message-ID of a notification sent for the other case (recorded
    // as the sender records it) threads into that case.
    await fx.store.unitOfWork((uow) => recordSentMessageId(uow, other, '<notice-7@desk.example>'));
    await mail('reply-2', 'Re: Your ticket', 'Scanner y is fine.', ['In-Reply-To: <notice-7@desk.example>']);
    await eventually(async () => (await rootOf(other)).state === 'done', { what: 'the notified case ran to done', timeoutMs: 30_000 });
    expect((await fx.rows<{ answer: string }>('SELECT answer FROM questions WHERE case_id = $1', [other]))[0]!.answer).toBe('Scanner y is fine.');
    expect(await countOf('SELECT 1 FROM cases')).toBe(casesBefore);
  });

  it('a webhook naming an existing origin key appends to that case; its redelivery appends nothing', async () => {
    const send = async (payload: unknown) => {
      const body = JSON.stringify(payload);
      return webhooks.handle({ source: 'tickets', headers: signBody(COMMENT_SIGNATURE, SECRET, body), rawBody: body });
    };
    const opened = await send({ ticket: { id: 'T-77', title: 'VPN down' }, comment: 'The VPN is down since noon.' });
    expect(opened).toMatchObject({ status: 201, created: true });
    const caseId = (opened as { caseId: string }).caseId;
    await eventually(async () => (await rootOf(caseId)).park_reason === 'question', { what: 'the ticket root asked', timeoutMs: 20_000 });

    // The opening delivery again: the same input, nothing applied.
    expect(await send({ ticket: { id: 'T-77', title: 'VPN down' }, comment: 'The VPN is down since noon.' })).toMatchObject({ status: 200, caseId, created: false });
    expect(await countOf('SELECT 1 FROM case_inputs WHERE case_id = $1', [caseId])).toBe(1);

    // A comment on the same ticket: the case's input, answering its open question.
    const comment = { ticket: { id: 'T-77', title: 'VPN down' }, comment: 'Use printer y.' };
    expect(await send(comment)).toMatchObject({ status: 200, caseId, created: false });
    expect(await send(comment)).toMatchObject({ status: 200, caseId, created: false }); // redelivered
    // A second comment while that answer is on its way is new material, not a second answer.
    expect(await send({ ticket: { id: 'T-77', title: 'VPN down' }, comment: 'Also check the router.' })).toMatchObject({ status: 200, caseId, created: false });
    await eventually(async () => (await rootOf(caseId)).state === 'done', { what: 'the ticket task ran to done', timeoutMs: 30_000 });
    expect(await countOf("SELECT 1 FROM cases WHERE origin_key LIKE 'webhook:tickets:%'")).toBe(1);
    expect((await fx.rows<{ applied_as: string }>('SELECT applied_as FROM case_inputs WHERE case_id = $1 ORDER BY created_at', [caseId])).map((r) => r.applied_as)).toEqual(['opened', 'answered', 'appended']);
    expect((await fx.rows<{ answer: string }>('SELECT answer FROM questions WHERE case_id = $1', [caseId]))[0]!.answer).toBe('Use printer y.');
    // One answer was sent, once: neither redelivery applied anything.
    expect(await countOf("SELECT 1 FROM outbox_messages WHERE case_id = $1 AND type = 'question.answered'", [caseId])).toBe(1);
    expect(await countOf("SELECT 1 FROM ledger WHERE case_id = $1 AND kind = 'answer_submitted'", [caseId])).toBe(1);

    const notes = await fx.rows<{ body: { text: string } }>("SELECT n.body FROM task_notes n JOIN tasks t ON t.id = n.task_id WHERE t.case_id = $1 AND n.kind = 'case_input' ORDER BY n.seq", [caseId]);
    expect(notes.map((n) => n.body.text)).toEqual(['Also check the router.']);
    expect(await countOf("SELECT 1 FROM ledger WHERE case_id = $1 AND kind = 'case_input_appended'", [caseId])).toBe(1);

    // The root is done (no channel tells this customer here: the case waits to tell them). A
    // further comment is not a note for a root that will never read it: it reopens the case
    // with a new root whose objective it is (channels.test.ts covers told → reopened).
    await eventually(async () => (await fx.rows<{ state_reason: string | null }>('SELECT state_reason FROM cases WHERE id = $1', [caseId]))[0]!.state_reason === 'telling_customer', { what: 'the case waits to tell the customer', timeoutMs: 10_000 });
    expect(await send({ ticket: { id: 'T-77', title: 'VPN down' }, comment: 'It works again, thanks.' })).toMatchObject({ status: 200, caseId, created: false });
    expect(await countOf("SELECT 1 FROM ledger WHERE case_id = $1 AND kind = 'case_reopened'", [caseId])).toBe(1);
    expect(await countOf('SELECT 1 FROM tasks WHERE case_id = $1 AND parent_id IS NULL', [caseId])).toBe(2);
    expect((await fx.rows<{ applied_as: string }>('SELECT applied_as FROM case_inputs WHERE case_id = $1 ORDER BY created_at', [caseId])).map((r) => r.applied_as)).toEqual(['opened', 'answered', 'appended', 'reopened']);
    expect(await countOf("SELECT 1 FROM cases WHERE origin_key LIKE 'webhook:tickets:%'")).toBe(1);
  });
});

describe('threading: pure decisions', () => {
  const imap = (inReplyTo: string | undefined, references: string[]) =>
    ({ source: 'mailbox', originKey: 'k', title: 't', body: '', receivedAt: '', attachments: [], raw: { kind: 'imap', account: 'a', mailbox: 'm', uidValidity: 1, uid: 1, locator: 'l', references, size: 1, sourceSha256: 'x', truncated: false, ...(inReplyTo ? { inReplyTo } : {}) } }) as const;
  it('matches In-Reply-To first, then References newest first, without brackets or repeats', () => {
    expect(replyTargets(imap('<b@x>', ['<a@x>', '<b@x>', ' <c@x> ']))).toEqual(['b@x', 'c@x', 'a@x']);
    expect(replyTargets(imap(undefined, []))).toEqual([]);
  });
  it('keeps what the customer wrote, not the quoted thread', () => {
    expect(replyText({ title: 'Re: x', body: 'Take x.\n\nOn Tue, A wrote:\n> old\n> older\n' })).toBe('Take x.');
    expect(replyText({ title: 'Re: x', body: '> only quoted' })).toBe('Re: x');
  });
});
