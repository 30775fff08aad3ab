/**
 * Inbox statements. The insert runs first in the consumer's unit of work: a concurrent
 * duplicate blocks on the primary key until we commit, then sees our row.
 */
import type { InboxDisposition } from '@everdict/contracts';
import type { Sql } from '../db.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const HASH = /^sha256:[0-9a-f]{64}$/;
const NAME = /^[a-z][a-z0-9._-]{0,99}$/;

/**
 * Whether every value of an inbox row has a closed, validated shape (uuid, sha256 digest, our own
 * service and type names): only such a row may be rendered with inline literals.
 */
export function inlinableInboxRow(consumer: string, messageId: string, payloadHash: string, type: string): boolean {
  return NAME.test(consumer) && UUID.test(messageId) && HASH.test(payloadHash) && NAME.test(type);
}

/**
 * The dedup insert. When every value has a closed, validated shape (uuid, sha256 digest, our own
 * service and type names) it is rendered with inline literals, so the store can send it in the
 * same round trip as BEGIN — the inbox then costs the unit of work no extra round trip. Any
 * value outside those shapes falls back to bind parameters; nothing free-form is ever inlined.
 */
export function insertInbox(consumer: string, messageId: string, payloadHash: string, type: string, disposition: InboxDisposition): Sql {
  if (inlinableInboxRow(consumer, messageId, payloadHash, type) && NAME.test(disposition)) {
    return {
      text: `INSERT INTO inbox_messages (consumer, message_id, payload_hash, type, disposition)
             VALUES ('${consumer}', '${messageId}'::uuid, '${payloadHash}', '${type}', '${disposition}')
             ON CONFLICT (consumer, message_id) DO NOTHING
             RETURNING message_id`,
    };
  }
  return {
    name: 'ev_insert_inbox',
    text: `INSERT INTO inbox_messages (consumer, message_id, payload_hash, type, disposition)
           VALUES ($1::text, $2::uuid, $3::text, $4::text, $5::text)
           ON CONFLICT (consumer, message_id) DO NOTHING
           RETURNING message_id`,
    values: [consumer, messageId, payloadHash, type, disposition],
  };
}

export function selectInbox(consumer: string, messageId: string): Sql {
  return {
    name: 'ev_select_inbox',
    text: 'SELECT payload_hash, disposition FROM inbox_messages WHERE consumer = $1::text AND message_id = $2::uuid',
    values: [consumer, messageId],
  };
}

export function updateInboxDisposition(consumer: string, messageId: string, disposition: InboxDisposition): Sql {
  return {
    name: 'ev_update_inbox_disposition',
    text: 'UPDATE inbox_messages SET disposition = $3::text WHERE consumer = $1::text AND message_id = $2::uuid',
    values: [consumer, messageId, disposition],
  };
}

export function insertDeadLetter(d: { consumer: string; messageId?: string | null; type?: string | null; reason: string; detail: string; payloadHash?: string | null }): Sql {
  return {
    text: `INSERT INTO dead_letters (consumer, message_id, type, reason, detail, payload_hash)
           VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text)`,
    values: [d.consumer, d.messageId ?? null, d.type ?? null, d.reason, d.detail.slice(0, 2000), d.payloadHash ?? null],
  };
}
