/**
 * Raw message bytes → NormalisedArrival. `parseMail` wraps mailparser; `normaliseMail` is the
 * pure mapping from a parsed message plus its IMAP coordinates.
 */
import { createHash } from 'node:crypto';
import { simpleParser } from 'mailparser';
import type { AddressObject, ParsedMail } from 'mailparser';
import { oneLineTitle } from '../arrival.js';
import type { AttachmentMeta, ImapReference, NormalisedArrival } from '../arrival.js';
import { mailLocator, mailOriginKey, normaliseMessageId } from '../origin-key.js';

/** The fields of a parsed mail that intake uses; a subset of mailparser's ParsedMail. */
export interface ParsedMailFields {
  subject?: string;
  text?: string;
  messageId?: string;
  inReplyTo?: string;
  references?: string | string[];
  from?: { value: Array<{ address?: string }> };
  attachments: Array<{ filename?: string; contentType: string; size: number; checksum: string; contentId?: string; contentDisposition?: string; related?: boolean }>;
}

/** Where the message sits on the server and how it was fetched. */
interface MailCoordinates {
  account: string;
  mailbox: string;
  uidValidity: number;
  uid: number;
  /** IMAP INTERNALDATE (server receipt), null if the server gave none. */
  internalDate: Date | null;
  /** RFC 822 size on the server. */
  size: number;
  /** sha-256 (hex) of the bytes fetched. */
  sourceSha256: string;
  truncated: boolean;
  /** Customer this mailbox belongs to, from config. */
  customer?: string;
}

export function sha256OfBytes(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * Parses raw RFC 5322 bytes. Attachment checksums are sha-256 so they can be reported without
 * keeping the bytes; the HTML→text conversion stays on so an HTML-only mail still has a body.
 */
export async function parseMail(source: Buffer): Promise<ParsedMail> {
  return simpleParser(source, { checksumAlgo: 'sha256', skipImageLinks: true, skipTextToHtml: true, skipTextLinks: true, keepCidLinks: false });
}

function firstAddress(from: ParsedMailFields['from']): string | undefined {
  const a = from?.value.find((v) => typeof v.address === 'string' && v.address.length > 0);
  return a?.address?.toLowerCase();
}

function idList(value: string | string[] | undefined): string[] {
  const raw = value === undefined ? [] : Array.isArray(value) ? value : value.split(/\s+/);
  return raw.map((v) => normaliseMessageId(v)).filter((v): v is string => v !== undefined);
}

function attachmentMeta(a: ParsedMailFields['attachments'][number]): AttachmentMeta {
  const meta: AttachmentMeta = {
    contentType: a.contentType,
    size: a.size,
    sha256: a.checksum,
    inline: a.contentDisposition === 'inline' || a.related === true,
  };
  if (a.filename !== undefined && a.filename.length > 0) meta.filename = a.filename;
  const cid = normaliseMessageId(a.contentId);
  if (cid !== undefined) meta.contentId = cid;
  return meta;
}

/** Parsed mail + coordinates → arrival. Pure. `now` stamps mails without INTERNALDATE. */
export function normaliseMail(parsed: ParsedMailFields, at: MailCoordinates, now: Date): NormalisedArrival {
  const messageId = normaliseMessageId(parsed.messageId);
  const inReplyTo = idList(parsed.inReplyTo)[0];
  const from = firstAddress(parsed.from);
  const receivedAt = at.internalDate !== null && !Number.isNaN(at.internalDate.getTime()) ? at.internalDate : now;
  const raw: ImapReference = {
    kind: 'imap',
    account: at.account,
    mailbox: at.mailbox,
    uidValidity: at.uidValidity,
    uid: at.uid,
    locator: mailLocator(at.account, at.mailbox, at.uidValidity, at.uid),
    references: idList(parsed.references),
    size: at.size,
    sourceSha256: at.sourceSha256,
    truncated: at.truncated,
  };
  if (messageId !== undefined) raw.messageId = messageId;
  if (inReplyTo !== undefined) raw.inReplyTo = inReplyTo;
  if (from !== undefined) raw.from = from;
  const arrival: NormalisedArrival = {
    source: 'mailbox',
    originKey: mailOriginKey({ account: at.account, mailbox: at.mailbox, messageId, sourceSha256: at.sourceSha256 }),
    title: oneLineTitle(parsed.subject, '(no subject)'),
    body: (parsed.text ?? '').replace(/\r\n/g, '\n').trim(),
    receivedAt: receivedAt.toISOString(),
    attachments: parsed.attachments.map(attachmentMeta),
    raw,
  };
  if (at.customer !== undefined) arrival.customer = at.customer;
  return arrival;
}

/** Narrows mailparser's wider `from` type to what normaliseMail reads. */
export function parsedFields(p: ParsedMail): ParsedMailFields {
  const from: AddressObject | undefined = p.from;
  const fields: ParsedMailFields = { attachments: p.attachments };
  if (p.subject !== undefined) fields.subject = p.subject;
  if (p.text !== undefined) fields.text = p.text;
  if (p.messageId !== undefined) fields.messageId = p.messageId;
  if (p.inReplyTo !== undefined) fields.inReplyTo = p.inReplyTo;
  if (p.references !== undefined) fields.references = p.references;
  if (from !== undefined) fields.from = from;
  return fields;
}
