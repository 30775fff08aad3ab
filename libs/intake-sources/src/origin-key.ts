/**
 * Origin keys: the dedup identity of an arrival (§11.6). Pure.
 *
 *   mailbox   mail:<account>/<mailbox>:mid:<Message-ID>       the message has a Message-ID
 *             mail:<account>/<mailbox>:sha256:<raw bytes hex>  it has none
 *   webhook   webhook:<source>:<delivery id>
 *   api       api:<principal>:<client idempotency key>
 *   schedule  schedule:<case type>:<slot, ISO-8601 UTC>
 *
 * Why a mail's key is NOT its UID: `mail:<account>/<mailbox>:<uidvalidity>:<uid>` (the
 * *locator*, kept in the arrival's raw reference) names a message only while UIDVALIDITY
 * holds. When the server changes UIDVALIDITY (mailbox recreated, server migrated, index
 * rebuilt) every message gets a new UID, and a key built from UIDs would open a second case for
 * every mail re-scanned after the re-baseline. The Message-ID travels with the message through
 * all of these, so it is the identity; a message without one (rare: submission servers add it)
 * is identified by the sha-256 of its bytes, which IMAP keeps immutable. Keys are scoped to the
 * monitored mailbox, so one mail copied to two monitored mailboxes opens one case in each.
 *
 * Trade-off, documented on purpose: a sender who reuses a Message-ID (a broken mailer, or a
 * forgery of one already ingested into the same mailbox) is deduplicated into the earlier case
 * instead of opening a new one. Intake sees `created: false` for it and may thread it.
 *
 * Escaping: every component but the last has `%`, `:` and `/` percent-encoded so the separators
 * stay unambiguous; every component has whitespace, control and non-ASCII characters
 * percent-encoded (UTF-8), so a key is one printable ASCII token.
 */
import { sha256Hex } from '@everdict/contracts';

/** Message-IDs longer than this are keyed by their sha-256 to bound key length. */
const MAX_MESSAGE_ID_IN_KEY = 250;

function encodeChar(ch: string): string {
  return Array.from(Buffer.from(ch, 'utf8'), (b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');
}

/** Escapes a non-final key component (separators included). */
export function escapeKeyPart(part: string): string {
  return part.replace(/[%:/]|[^\x21-\x7e]/gu, encodeChar);
}

/** Escapes the final key component: separators may stay, since nothing follows it. */
function escapeKeyTail(part: string): string {
  return part.replace(/%|[^\x21-\x7e]/gu, encodeChar);
}

/** The cursor key of a monitored mailbox: `<account>/<mailbox>`. */
export function mailboxKey(account: string, mailbox: string): string {
  return `${escapeKeyPart(account)}/${escapeKeyPart(mailbox)}`;
}

/** `mail:<account>/<mailbox>:<uidvalidity>:<uid>` — where the message is now, not what it is. */
export function mailLocator(account: string, mailbox: string, uidValidity: number, uid: number): string {
  return `mail:${mailboxKey(account, mailbox)}:${uidValidity}:${uid}`;
}

/**
 * The Message-ID as a key component: surrounding whitespace and angle brackets removed, case
 * kept (the local part is case-sensitive). Undefined for an absent or empty header.
 */
export function normaliseMessageId(header: string | undefined | null): string | undefined {
  if (header == null) return undefined;
  const trimmed = header.trim().replace(/^<+/, '').replace(/>+$/, '').trim();
  return trimmed.length > 0 ? trimmed : undefined;
}

interface MailIdentity {
  account: string;
  mailbox: string;
  /** The Message-ID header as received (brackets allowed), if any. */
  messageId?: string | null;
  /** sha-256 (hex) of the raw message bytes; the identity when there is no Message-ID. */
  sourceSha256: string;
}

/** The dedup key of a mail: stable across UIDVALIDITY changes (see the module comment). */
export function mailOriginKey(mail: MailIdentity): string {
  const scope = `mail:${mailboxKey(mail.account, mail.mailbox)}`;
  const mid = normaliseMessageId(mail.messageId);
  if (mid === undefined) return `${scope}:sha256:${mail.sourceSha256}`;
  if (mid.length > MAX_MESSAGE_ID_IN_KEY) return `${scope}:mid-sha256:${sha256Hex(mid)}`;
  return `${scope}:mid:${escapeKeyTail(mid)}`;
}

/** `webhook:<source>:<delivery id>` — a redelivery of the same delivery is the same arrival. */
export function webhookOriginKey(source: string, deliveryId: string): string {
  return `webhook:${escapeKeyPart(source)}:${escapeKeyTail(deliveryId)}`;
}

/** `api:<principal>:<client key>` — client keys are scoped to the principal that sent them. */
export function apiOriginKey(principal: string, clientKey: string): string {
  return `api:${escapeKeyPart(principal)}:${escapeKeyTail(clientKey)}`;
}

/** `schedule:<case type>:<slot>` — one case per slot, however many replicas fire it. */
export function scheduleOriginKey(caseType: string, slot: Date): string {
  return `schedule:${escapeKeyPart(caseType)}:${slot.toISOString()}`;
}
