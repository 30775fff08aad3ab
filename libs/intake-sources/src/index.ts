/**
 * @everdict/intake-sources — where cases come from, before platform.intake (§11.6).
 *
 * - arrival: the normalised arrival every source produces, and the ArrivalSink port intake
 *   implements (idempotent on the origin key).
 * - origin keys: the dedup identity per source (mailbox, webhook, api, schedule).
 * - mailbox monitor: IMAP (imapflow + mailparser) with UID/UIDVALIDITY cursors behind the
 *   MailboxCursorStore port, IDLE or polling, reconnect backoff, re-baseline alerts.
 * - ticket webhooks: HMAC-SHA256 verification over the raw body, a generic JSON-pointer
 *   mapping and GitHub's issues webhook, behind an HTTP-agnostic handler.
 *
 * This package owns no tables: persistence reaches it only through the two ports.
 */
export * from './arrival.js';
export * from './origin-key.js';
export * from './backoff.js';
export * from './memory-sink.js';
export * from './mail/cursor.js';
export * from './mail/normalise.js';
export * from './mail/monitor.js';
export * from './webhook/errors.js';
export * from './webhook/signature.js';
export * from './webhook/json-pointer.js';
export * from './webhook/mapping.js';
export * from './webhook/handler.js';
