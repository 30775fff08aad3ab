/**
 * Inbox statements. The insert goes in, or ahead of, the first statement of the consumer's unit
 * of work (carryInbox; a batch's first): a concurrent duplicate blocks on the primary key until
 * we commit, then fails on it. Every delivery pays for
 * the table's indexes and constraints once per insert statement, so it has only its key
 * (message_id, consumer) and its disposition is an enum, not a CHECK (migration 0026).
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

/** One inbox row's values as inline literals; every value must have passed `inlinableInboxRow`. */
function rowLiterals(consumer: string, messageId: string, payloadHash: string, type: string, disposition: InboxDisposition): string {
  return `'${consumer}', '${messageId}'::uuid, '${payloadHash}', '${type}', '${disposition}'`;
}

/** The primary key a second record of one delivery violates (see Store.unitOfWorkOnInbox). */
export const INBOX_KEY = 'inbox_messages_pkey';

const INSERT_INBOX = `INSERT INTO inbox_messages (consumer, message_id, payload_hash, type, disposition)
           VALUES ($1::text, $2::uuid, $3::text, $4::text, $5::inbox_disposition)`;

/**
 * The dedup insert: a plain INSERT, so a delivery recorded already fails it on INBOX_KEY (an ON
 * CONFLICT clause makes every insert speculative: an extra index probe and WAL record, measured
 * at a third of the inbox's cost on the single path). When every value has a closed, validated
 * shape (uuid, sha256 digest, our own service and type names) the values are rendered as inline
 * literals, so the store can send it in the same round trip as BEGIN — the inbox then costs the
 * unit of work no extra round trip — and on Postgres it runs as EXECUTE of the session-prepared
 * insert, so the server does not parse and plan it for every delivery (measured: another third).
 * Any value outside those shapes falls back to bind parameters; nothing free-form is ever inlined.
 */
export function insertInbox(consumer: string, messageId: string, payloadHash: string, type: string, disposition: InboxDisposition): Sql {
  if (inlinableInboxRow(consumer, messageId, payloadHash, type) && NAME.test(disposition)) {
    const literals = rowLiterals(consumer, messageId, payloadHash, type, disposition);
    return {
      text: `INSERT INTO inbox_messages (consumer, message_id, payload_hash, type, disposition) VALUES (${literals})`,
      sessionPrepared: {
        name: 'ev_inbox_insert',
        prepare: `PREPARE ev_inbox_insert (text, uuid, text, text, inbox_disposition) AS ${INSERT_INBOX}`,
        execute: `EXECUTE ev_inbox_insert (${literals})`,
      },
    };
  }
  return { name: 'ev_insert_inbox', text: INSERT_INBOX, values: [consumer, messageId, payloadHash, type, disposition] };
}

/** The name a carried statement's server-side prepared statement takes ($name + this). */
const CARRIED = ':inbox';
/** Postgres keeps a prepared statement's name in NAMEDATALEN - 1 bytes; a longer one would be cut. */
const MAX_STATEMENT_NAME = 63;
/** A statement a data-modifying WITH can be put in front of (or merged into, when it has one). */
const CARRIER = /^\s*(?:(select|insert|update|delete)\b|(with)(\s+recursive)?\s)/i;

/**
 * `q` with `row`'s inbox insert put in front as a data-modifying WITH, so the row costs the
 * unit of work no statement of its own (Store.unitOfWorkOnInbox); undefined when `q` cannot
 * carry it:
 * - only a named statement with bind parameters: the server keeps its plan (an unnamed one is
 *   parsed and planned per delivery, dearer than the statement it saves), and the row's values
 *   follow the statement's own parameters ($k+1 … $k+5, k = its value count, which is the
 *   highest parameter the statement uses: Postgres refuses a Bind with more);
 * - one SELECT, INSERT, UPDATE, DELETE or WITH statement (no `;`): those take a WITH;
 * - none that names inbox_messages: a WITH's insert is not visible to the statement it rides
 *   with (one snapshot), so an inbox statement must see the row from a statement before it.
 * Postgres runs a WITH's insert once and to the end, whatever the statement returns; an
 * unreferenced one after the statement itself, so the statement may fail first (its own key
 * violated by a delivery applied already): the store then looks the row up (unitOfWorkOnInbox).
 */
export function carryInbox(q: Sql, row: { consumer: string; messageId: string; payloadHash: string; type: string; disposition: InboxDisposition }): Sql | undefined {
  const k = q.values?.length ?? 0;
  if (q.name === undefined || k === 0 || q.sessionPrepared !== undefined) return undefined;
  const name = `${q.name}${CARRIED}`;
  if (Buffer.byteLength(name) > MAX_STATEMENT_NAME || q.text.includes(';') || q.text.includes('inbox_messages')) return undefined;
  const shape = CARRIER.exec(q.text);
  if (shape === null) return undefined;
  const p = (i: number) => `$${k + i}`;
  const cte = `ev_inbox AS (INSERT INTO inbox_messages (consumer, message_id, payload_hash, type, disposition)
           VALUES (${p(1)}::text, ${p(2)}::uuid, ${p(3)}::text, ${p(4)}::text, ${p(5)}::inbox_disposition))`;
  // A statement with its own WITH gets the insert as the first entry of that list.
  const text = shape[2] === undefined ? `WITH ${cte}\n${q.text}` : `WITH${shape[3] ?? ''} ${cte},${q.text.slice(shape[0].length - 1)}`;
  return { name, text, values: [...q.values!, row.consumer, row.messageId, row.payloadHash, row.type, row.disposition] };
}

/** How a batch insert treats an id recorded already: fail on INBOX_KEY (strict) or skip it. */
export type InboxBatchMode = 'strict' | 'skip';

/** What ends a batch insert: for `skip`, the clause that skips recorded ids and names the inserted ones. */
const onRecorded = (mode: InboxBatchMode) =>
  mode === 'skip'
    ? `
           ON CONFLICT (consumer, message_id) DO NOTHING
           RETURNING message_id`
    : '';

const INSERT_INBOX_BATCH = (mode: InboxBatchMode) => `INSERT INTO inbox_messages (consumer, message_id, payload_hash, type, disposition)
           SELECT $1::text, m.message_id, m.payload_hash, m.type, 'applied'::inbox_disposition
             FROM unnest($2::uuid[], $3::text[], $4::text[]) WITH ORDINALITY AS m(message_id, payload_hash, type, n)
            ORDER BY m.n${onRecorded(mode)}`;

/**
 * The inbox rows of several deliveries ('applied', in the given order; see recordInboxBatch).
 * `strict`: a plain INSERT, which fails on INBOX_KEY if any id is recorded already (no
 * speculative insertion: the same saving as the single insert's); `skip`: ids recorded already
 * are skipped and the ids inserted are returned. Every value must have passed
 * `inlinableInboxRow`: they are rendered as inline literals (the VALUES form for ports without
 * session statements, array literals for the EXECUTE of the session-prepared form).
 */
export function insertInboxBatch(consumer: string, items: readonly { messageId: string; payloadHash: string; type: string }[], mode: InboxBatchMode = 'skip'): Sql {
  for (const it of items) if (!inlinableInboxRow(consumer, it.messageId, it.payloadHash, it.type)) throw new Error(`inbox row of ${it.messageId} cannot be inlined`);
  const rows = items.map((it) => `(${rowLiterals(consumer, it.messageId, it.payloadHash, it.type, 'applied')})`).join(', ');
  // Closed shapes hold no comma, brace, quote, backslash or space: array elements need no quoting.
  const array = (of: (it: (typeof items)[number]) => string) => `'{${items.map(of).join(',')}}'`;
  const name = mode === 'skip' ? 'ev_inbox_insert_batch' : 'ev_inbox_insert_batch_strict';
  return {
    text: `INSERT INTO inbox_messages (consumer, message_id, payload_hash, type, disposition)
           VALUES ${rows}${onRecorded(mode)}`,
    sessionPrepared: {
      name,
      prepare: `PREPARE ${name} (text, uuid[], text[], text[]) AS ${INSERT_INBOX_BATCH(mode)}`,
      execute: `EXECUTE ${name} ('${consumer}', ${array((it) => it.messageId)}, ${array((it) => it.payloadHash)}, ${array((it) => it.type)})`,
    },
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
    text: 'UPDATE inbox_messages SET disposition = $3::inbox_disposition WHERE consumer = $1::text AND message_id = $2::uuid',
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
