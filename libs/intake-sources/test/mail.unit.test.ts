import { describe, expect, it } from 'vitest';
import type { MailboxCursor } from '@everdict/intake-sources';
import { isEverdictError } from '@everdict/contracts';
import { InMemoryArrivalSink, InMemoryCursorStore, MailboxMonitor, advanceCursor, normaliseMail, parseMail, parsedFields, planResume, selectUids, sha256OfBytes } from '@everdict/intake-sources';

const NOW = new Date('2026-05-04T10:00:00.000Z');
const DAY = 86_400_000;

describe('planResume', () => {
  it('baselines a never-seen mailbox at UIDNEXT for startAt=new, stamping the watermark', () => {
    expect(planResume(null, { uidValidity: 7, uidNext: 11 }, { startAt: 'new', rescanMarginMs: DAY, now: NOW })).toEqual({
      kind: 'baseline',
      cursor: { uidValidity: 7, lastUid: 10, watermark: NOW.toISOString(), rescan: null },
    });
  });

  it('baselines at UID 0 for startAt=all', () => {
    expect(planResume(null, { uidValidity: 7, uidNext: 11 }, { startAt: 'all', rescanMarginMs: DAY, now: NOW })).toEqual({
      kind: 'baseline',
      cursor: { uidValidity: 7, lastUid: 0, watermark: null, rescan: null },
    });
  });

  it('continues from the stored cursor under the same UIDVALIDITY', () => {
    const stored: MailboxCursor = { uidValidity: 7, lastUid: 10, watermark: NOW.toISOString(), rescan: null };
    expect(planResume(stored, { uidValidity: 7, uidNext: 14 }, { startAt: 'new', rescanMarginMs: DAY, now: NOW })).toEqual({ kind: 'continue', cursor: stored });
  });

  it('re-baselines on a UIDVALIDITY change: UID 0, re-scan of what exists since watermark minus margin', () => {
    const stored: MailboxCursor = { uidValidity: 7, lastUid: 10, watermark: '2026-05-03T12:00:00.000Z', rescan: null };
    const d = planResume(stored, { uidValidity: 9, uidNext: 6 }, { startAt: 'new', rescanMarginMs: DAY, now: NOW });
    expect(d).toEqual({
      kind: 'rebaseline',
      reason: 'uidvalidity_changed',
      previous: stored,
      cursor: { uidValidity: 9, lastUid: 0, watermark: stored.watermark, rescan: { since: '2026-05-02T12:00:00.000Z', throughUid: 5 } },
    });
  });

  it('re-baselines when UIDNEXT fell to the cursor under the same UIDVALIDITY (broken server)', () => {
    const stored: MailboxCursor = { uidValidity: 7, lastUid: 10, watermark: null, rescan: null };
    const d = planResume(stored, { uidValidity: 7, uidNext: 3 }, { startAt: 'new', rescanMarginMs: DAY, now: NOW });
    expect(d.kind).toBe('rebaseline');
    if (d.kind === 'rebaseline') {
      expect(d.reason).toBe('uid_regressed');
      expect(d.cursor.rescan).toEqual({ since: null, throughUid: 2 });
    }
  });

  it('needs no re-scan when the new mailbox is empty', () => {
    const stored: MailboxCursor = { uidValidity: 7, lastUid: 10, watermark: null, rescan: null };
    const d = planResume(stored, { uidValidity: 8, uidNext: 1 }, { startAt: 'new', rescanMarginMs: DAY, now: NOW });
    expect(d.kind === 'rebaseline' && d.cursor).toEqual({ uidValidity: 8, lastUid: 0, watermark: null, rescan: null });
  });
});

describe('selectUids / advanceCursor', () => {
  const plain: MailboxCursor = { uidValidity: 1, lastUid: 4, watermark: null, rescan: null };

  it('ingests only UIDs above the cursor, sorted, once (IMAP n:* returns the last message even below n)', () => {
    expect(selectUids([4, 7, 5, 5], plain, null)).toEqual([
      { uid: 5, action: 'ingest' },
      { uid: 7, action: 'ingest' },
    ]);
    expect(selectUids([3], plain, null)).toEqual([]);
  });

  it('during a re-scan passes over old UIDs before the watermark and ingests new ones regardless of date', () => {
    const c: MailboxCursor = { uidValidity: 2, lastUid: 0, watermark: null, rescan: { since: '2026-05-01T00:00:00.000Z', throughUid: 3 } };
    expect(selectUids([1, 2, 3, 4], c, new Set([2]))).toEqual([
      { uid: 1, action: 'pass' },
      { uid: 2, action: 'ingest' },
      { uid: 3, action: 'pass' },
      { uid: 4, action: 'ingest' },
    ]);
  });

  it('re-scans everything when the re-scan has no lower bound', () => {
    const c: MailboxCursor = { uidValidity: 2, lastUid: 0, watermark: null, rescan: { since: null, throughUid: 3 } };
    expect(selectUids([1, 2], c, null).map((a) => a.action)).toEqual(['ingest', 'ingest']);
  });

  it('advances lastUid and the watermark monotonically and ends the re-scan at throughUid', () => {
    const c: MailboxCursor = { uidValidity: 2, lastUid: 0, watermark: '2026-05-02T00:00:00.000Z', rescan: { since: null, throughUid: 2 } };
    const c1 = advanceCursor(c, 1, new Date('2026-05-01T00:00:00.000Z'));
    expect(c1).toEqual({ uidValidity: 2, lastUid: 1, watermark: '2026-05-02T00:00:00.000Z', rescan: { since: null, throughUid: 2 } });
    const c2 = advanceCursor(c1, 2, new Date('2026-05-03T00:00:00.000Z'));
    expect(c2).toEqual({ uidValidity: 2, lastUid: 2, watermark: '2026-05-03T00:00:00.000Z', rescan: null });
    expect(advanceCursor(c2, 2, null)).toBe(c2);
  });

  it('the in-memory cursor store hands out copies', async () => {
    const store = new InMemoryCursorStore();
    expect(await store.load('k')).toBeNull();
    const c: MailboxCursor = { uidValidity: 1, lastUid: 1, watermark: null, rescan: null };
    await store.save('k', c);
    c.lastUid = 99;
    expect((await store.load('k'))?.lastUid).toBe(1);
  });
});

const MULTIPART = [
  'From: "Ada Customer" <Ada@Customer.example>',
  'To: support@example.com',
  'Subject: =?UTF-8?Q?Printer_on_fire_=E2=80=94_again?=',
  'Message-ID: <case-42@customer.example>',
  'In-Reply-To: <earlier-1@example.com>',
  'References: <root-0@example.com> <earlier-1@example.com>',
  'Date: Mon, 04 May 2026 09:58:00 +0000',
  'MIME-Version: 1.0',
  'Content-Type: multipart/mixed; boundary="b1"',
  '',
  '--b1',
  'Content-Type: text/plain; charset=utf-8',
  '',
  'The printer in room 4 is on fire.',
  'Please advise.',
  '--b1',
  'Content-Type: application/pdf; name="photo.pdf"',
  'Content-Disposition: attachment; filename="photo.pdf"',
  'Content-Transfer-Encoding: base64',
  '',
  Buffer.from('%PDF-1.4 fake').toString('base64'),
  '--b1--',
  '',
].join('\r\n');

const coords = (source: Buffer) => ({
  account: 'support@example.com',
  mailbox: 'INBOX',
  uidValidity: 1795981791,
  uid: 12,
  internalDate: new Date('2026-05-04T09:58:03.000Z'),
  size: source.length,
  sourceSha256: sha256OfBytes(source),
  truncated: false,
});

describe('normaliseMail', () => {
  it('maps a parsed multipart mail to an arrival without keeping attachment bytes', async () => {
    const source = Buffer.from(MULTIPART);
    const arrival = normaliseMail(parsedFields(await parseMail(source)), { ...coords(source), customer: 'acme' }, NOW);
    expect(arrival).toEqual({
      source: 'mailbox',
      originKey: 'mail:support@example.com/INBOX:mid:case-42@customer.example',
      customer: 'acme',
      title: 'Printer on fire — again',
      body: 'The printer in room 4 is on fire.\nPlease advise.',
      receivedAt: '2026-05-04T09:58:03.000Z',
      attachments: [{ filename: 'photo.pdf', contentType: 'application/pdf', size: 13, sha256: sha256OfBytes(Buffer.from('%PDF-1.4 fake')), inline: false }],
      raw: {
        kind: 'imap',
        account: 'support@example.com',
        mailbox: 'INBOX',
        uidValidity: 1795981791,
        uid: 12,
        locator: 'mail:support@example.com/INBOX:1795981791:12',
        messageId: 'case-42@customer.example',
        inReplyTo: 'earlier-1@example.com',
        references: ['root-0@example.com', 'earlier-1@example.com'],
        from: 'ada@customer.example',
        size: source.length,
        sourceSha256: sha256OfBytes(source),
        truncated: false,
      },
    });
    expect(JSON.stringify(arrival)).not.toContain(Buffer.from('%PDF-1.4 fake').toString('base64'));
  });

  it('derives a text body from an HTML-only mail and titles a subject-less one', async () => {
    const source = Buffer.from(['From: x@y.example', 'Content-Type: text/html; charset=utf-8', '', '<p>Hello <b>there</b></p>', ''].join('\r\n'));
    const arrival = normaliseMail(parsedFields(await parseMail(source)), { ...coords(source), internalDate: null }, NOW);
    expect(arrival.title).toBe('(no subject)');
    expect(arrival.body).toContain('Hello');
    expect(arrival.body).not.toContain('<p>');
    expect(arrival.receivedAt).toBe(NOW.toISOString());
    expect(arrival.originKey).toBe(`mail:support@example.com/INBOX:sha256:${sha256OfBytes(source)}`);
    expect(arrival.raw.kind === 'imap' && arrival.raw.messageId).toBeUndefined();
  });
});

describe('MailboxMonitor configuration', () => {
  const base = { account: 'support@example.com', host: '127.0.0.1', port: 143, auth: { user: 'u', pass: 'p' }, cursorStore: new InMemoryCursorStore(), sink: new InMemoryArrivalSink() };
  const refusedPath = (extra: Record<string, unknown>) => {
    try {
      new MailboxMonitor({ ...base, ...extra });
    } catch (err) {
      return isEverdictError(err, 'invalid_config') ? err.details.path : 'other';
    }
    return 'accepted';
  };

  it('refuses bad options up front, naming the field, and derives the cursor key', () => {
    expect(refusedPath({ port: 0 })).toBe('port');
    expect(refusedPath({ account: ' ' })).toBe('account');
    expect(refusedPath({ pollIntervalMs: 0 })).toBe('pollIntervalMs');
    expect(refusedPath({ reselectMs: -1 })).toBe('reselectMs');
    expect(refusedPath({})).toBe('accepted');
    expect(new MailboxMonitor({ ...base, mailbox: 'Support/Inbound' }).key).toBe('support@example.com/Support%2FInbound');
  });
});
