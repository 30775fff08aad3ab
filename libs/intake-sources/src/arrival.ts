/**
 * The normalised arrival (§11.6): whatever a case opens from — a mail in a monitored mailbox, a
 * ticket system's webhook, `POST /v1/cases`, a schedule slot — reaches platform.intake in this
 * one shape, stamped with its origin key. Intake dedups on `originKey` alone: two arrivals with
 * the same key are the same arrival, however many times and by however many replicas they are
 * delivered.
 *
 * Arrivals carry data, never secrets: no credentials, no signature headers, no attachment bytes.
 */

export type ArrivalSource = 'mailbox' | 'webhook' | 'api' | 'schedule';

/** What intake needs to know about an attachment without holding its bytes. */
export interface AttachmentMeta {
  /** As the sender named it; absent for unnamed parts. Untrusted text, never a path. */
  filename?: string;
  contentType: string;
  /** Decoded size in bytes. */
  size: number;
  /** sha-256 of the decoded bytes, lowercase hex. */
  sha256: string;
  /** Content-ID of an inline part (without angle brackets). */
  contentId?: string;
  /** True for parts the message shows inline (e.g. images referenced by cid:). */
  inline: boolean;
}

/** Where the arrival came from, precise enough to fetch the original again. */
export type RawReference = ImapReference | WebhookReference | ApiReference | ScheduleReference;

export interface ImapReference {
  kind: 'imap';
  account: string;
  mailbox: string;
  uidValidity: number;
  uid: number;
  /** `mail:<account>/<mailbox>:<uidvalidity>:<uid>` — locates the message, valid only until the next UIDVALIDITY change. */
  locator: string;
  /** The Message-ID header without angle brackets, when the message has one. */
  messageId?: string;
  /** In-Reply-To / References (without angle brackets), so intake can thread replies into an existing case. */
  inReplyTo?: string;
  references: string[];
  /** The sender's address (From), as the message claims it: unauthenticated. */
  from?: string;
  /** RFC 822 size on the server, in bytes. */
  size: number;
  /** sha-256 of the raw message bytes as fetched (lowercase hex). */
  sourceSha256: string;
  /** True when the message exceeded `maxMessageBytes` and only its head was parsed. */
  truncated: boolean;
}

export interface WebhookReference {
  kind: 'webhook';
  /** The configured source name (the path segment under /v1/intake/). */
  source: string;
  /** The mapping that read the payload (`generic`, `github-issues`). */
  mapping: string;
  deliveryId: string;
  /** The ticket system's event name, when it sends one (e.g. GitHub's X-GitHub-Event). */
  event?: string;
  /** A link back to the ticket in its own system, when the payload has one. */
  url?: string;
  /** sha-256 of the verified raw body (lowercase hex). */
  bodySha256: string;
}

interface ApiReference {
  kind: 'api';
  principal: string;
  /** The client's idempotency key for this request. */
  clientKey: string;
}

interface ScheduleReference {
  kind: 'schedule';
  caseType: string;
  /** The slot's instant, ISO-8601 UTC. */
  slot: string;
}

export interface NormalisedArrival {
  source: ArrivalSource;
  /** The dedup identity (see origin-key.ts for the rules per source). */
  originKey: string;
  /** The customer the source names; intake still resolves and checks it (§11.6). */
  customer?: string;
  /** One line, trimmed, never empty. */
  title: string;
  /** Plain text. */
  body: string;
  /** When the source received it (IMAP INTERNALDATE, webhook verification time), ISO-8601 UTC. */
  receivedAt: string;
  attachments: AttachmentMeta[];
  raw: RawReference;
}

/** What intake answers for an arrival: the case it opened, or the one it had already opened. */
export interface OpenedCase {
  caseId: string;
  /** False when the origin key had been seen before (a duplicate delivery). */
  created: boolean;
}

/**
 * Port to platform.intake. `open` MUST be idempotent on `arrival.originKey` — concurrent or
 * repeated calls with the same key resolve to the same `caseId`, exactly one with
 * `created: true` — because every source here delivers at least once: a crash after `open`
 * resolved but before the source recorded its progress repeats the call.
 */
export interface ArrivalSink {
  open(arrival: NormalisedArrival): Promise<OpenedCase>;
}

/** Titles are one line: collapse whitespace, cap the length, never return an empty string. */
export function oneLineTitle(text: string | undefined | null, fallback: string, maxChars = 300): string {
  const collapsed = (text ?? '').replace(/\s+/g, ' ').trim();
  const chosen = collapsed.length > 0 ? collapsed : fallback;
  return chosen.length > maxChars ? `${chosen.slice(0, maxChars - 1)}…` : chosen;
}
