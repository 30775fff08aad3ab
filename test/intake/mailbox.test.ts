/**
 * Mailboxes wired into intake (issue 6 item 2) against a REAL Dovecot IMAP server: a new mail
 * opens a case with its root task and task.runnable; the cursor lives in Postgres; with two
 * replicas only the advisory-lock holder monitors, and when it goes away the other takes over
 * from the stored cursor without ingesting anything twice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MailboxSupervisor, caseSink } from '@everdict/intake';
import type { IntakeMailbox } from '@everdict/intake';
import { createLogger } from '@everdict/service-kit';
import { Store } from '@everdict/store';
import { eventually } from '@everdict/testkit';
import { startDovecot } from '../../libs/intake-sources/test/dovecot.js';
import type { DovecotServer } from '../../libs/intake-sources/test/dovecot.js';
import { appendMail, count, createMailFolder, customerMail, fleetConfig, startFixture, testMailbox } from './helpers.js';
import type { IntakeFixture } from './helpers.js';

const ACCOUNT = 'support@example.com';
let server: DovecotServer;
let f: IntakeFixture;
let mailbox: IntakeMailbox;

const deliver = (id: string, subject: string) => appendMail(server, 'support', customerMail(ACCOUNT, id, subject, `Body of ${id}.`));

const mailCases = () => count(f.db, "SELECT 1 FROM cases WHERE origin_key LIKE 'mail:%'");

beforeAll(async () => {
  server = await startDovecot('intake-mailbox');
  await createMailFolder(server, 'support');
  await deliver('m-1', 'Printer on fire');
  mailbox = testMailbox(server, ACCOUNT, 'support');
  f = await startFixture('intake-mailbox', { sources: { webhooks: [], mailboxes: [mailbox] }, mailboxLockRetryMs: 200, mailboxMonitorOptions: { backoff: { baseMs: 50, maxMs: 200 } } });
});
afterAll(async () => {
  await f?.close();
  await server?.destroy();
});

describe('mailbox → case', () => {
  it('opens a case per mail, one monitor across replicas, and a takeover ingests nothing twice', async () => {
    await eventually(async () => (await mailCases()) === 1, { what: 'first mail opened a case', timeoutMs: 20_000 });
    const first = (await f.db.query<{ id: string; customer: string; case_type: string; origin_key: string }>({ text: "SELECT id, customer, case_type, origin_key FROM cases WHERE origin_key LIKE 'mail:%'" })).rows[0]!;
    expect(first).toMatchObject({ customer: 'acme', case_type: 'support', origin_key: 'mail:support@example.com/support:mid:m-1@example.org' });
    expect(await count(f.db, "SELECT 1 FROM outbox_messages WHERE case_id = $1 AND type = 'task.runnable'", [first.id])).toBe(1);
    await eventually(async () => (await count(f.db, 'SELECT 1 FROM mailbox_cursors WHERE last_uid = 1')) === 1, { what: 'cursor saved' });
    expect(f.intake.mailboxesHeld()).toEqual(['support@example.com/support']);

    // A second replica on the same database (its own store; the first one's closes with it):
    // it does not get the lock while the first holds it.
    const replica = new MailboxSupervisor([mailbox], {
      databaseUrl: f.databaseUrl,
      db: f.db,
      sinkFor: (m) => caseSink({ store: new Store(f.db), fleet: fleetConfig, caseType: m.caseType, ...(m.customer ? { customer: m.customer } : {}) }),
      logger: createLogger({ service: 'replica', level: 'error' }),
      lockRetryMs: 200,
      monitorOptions: { backoff: { baseMs: 50, maxMs: 200 } },
    });
    replica.start();
    try {
      await deliver('m-2', 'Second');
      await eventually(async () => (await mailCases()) === 2, { what: 'second mail opened a case', timeoutMs: 20_000 });
      expect(replica.held()).toEqual([]);

      // The first replica goes away; the second takes the lock and continues from the cursor.
      await f.service.shutdown('replica one stops');
      await eventually(() => replica.held().length === 1, { what: 'replica two took over', timeoutMs: 20_000 });
      await deliver('m-3', 'Third');
      await eventually(async () => (await mailCases()) === 3, { what: 'third mail opened a case', timeoutMs: 20_000 });
      await new Promise((r) => setTimeout(r, 600)); // a few more polls: nothing more may open
      expect(await mailCases()).toBe(3);
      expect(await count(f.db, "SELECT 1 FROM tasks t JOIN cases c ON c.id = t.case_id WHERE c.origin_key LIKE 'mail:%'")).toBe(3);
      expect(await count(f.db, 'SELECT 1 FROM mailbox_cursors WHERE last_uid = 3')).toBe(1);
    } finally {
      await replica.stop();
    }
  });
});
