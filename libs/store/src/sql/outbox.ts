/**
 * Outbox statements. Rows are written in the unit of work; the relay claims a batch with a
 * short lease (so N relays never publish the same row concurrently), publishes outside any
 * transaction, and marks rows published only after the broker confirmed them.
 */
import type { Sql } from '../db.js';

export const OUTBOX_CHANNEL = 'everdict_outbox';

/** `traceparent`: the envelope's, kept beside the bytes so the relay publishes it as a header. */
export function insertOutbox(m: { messageId: string; type: string; routingKey: string; caseId: string | null; body: Uint8Array; traceparent: string | null }): Sql {
  return {
    name: 'ev_insert_outbox',
    text: `INSERT INTO outbox_messages (message_id, type, routing_key, case_id, body, traceparent)
           VALUES ($1::uuid, $2::text, $3::text, $4::uuid, $5::bytea, $6::text)`,
    values: [m.messageId, m.type, m.routingKey, m.caseId, Buffer.from(m.body), m.traceparent],
  };
}

/** Postgres refuses a NOTIFY payload of 8,000 bytes or more; a longer id list is sent as none. */
const NOTIFY_PAYLOAD_MAX = 7_900;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The payload of an outbox NOTIFY: the committed rows' message ids, comma-separated, so a relay
 * of another process claims them by key; '' (claim everything claimable) when they do not fit.
 */
export function outboxNotifyPayload(messageIds: readonly string[]): string {
  const payload = messageIds.join(',');
  return payload.length < NOTIFY_PAYLOAD_MAX ? payload : '';
}

/**
 * The message ids an outbox NOTIFY names; undefined (rows of unknown ids may be waiting) for an
 * empty payload or one that is not a list of uuids — a payload is whatever any client of the
 * database sent, and a relay only ever claims claimable rows, whatever it names.
 */
export function outboxIdsOf(payload: string): string[] | undefined {
  if (payload === '') return undefined;
  const ids = payload.split(',');
  return ids.every((id) => UUID.test(id)) ? ids : undefined;
}

export function notifyOutbox(messageIds: readonly string[]): Sql {
  return { text: 'SELECT pg_notify($1::text, $2::text)', values: [OUTBOX_CHANNEL, outboxNotifyPayload(messageIds)] };
}

export interface OutboxRow {
  seq: number;
  message_id: string;
  type: string;
  routing_key: string;
  body: Buffer;
  created_at: Date;
  /** The W3C trace context the row was enqueued under (null: none). */
  traceparent: string | null;
}

/** Not held by another relay's live lease. */
const LEASE_FREE = '(claimed_until IS NULL OR claimed_until < now())';
/** The rows a claim may take: unpublished and lease-free. */
const CLAIMABLE = `published_at IS NULL AND ${LEASE_FREE}`;

/** Leases the rows `pick` selects (seqs, locked SKIP LOCKED) to relay $1 for $2 ms. */
function leasePicked(pick: string): string {
  return `UPDATE outbox_messages o
              SET claimed_by = $1::text,
                  claimed_until = now() + make_interval(secs => $2::double precision / 1000),
                  attempts = o.attempts + 1
             FROM (${pick}) pick
            WHERE o.seq = pick.seq
        RETURNING o.seq, o.message_id, o.type, o.routing_key, o.body, o.created_at, o.traceparent`;
}

/**
 * With `producers` (parameter `$n`): a relay holding broker credentials for only some services
 * claims only the rows those services enqueued, read from the envelope's sender.service in the
 * row's body (the service that wrote the row stamped it), so it never holds a row it cannot publish.
 */
const byProducer = (n: number) => `\n                      AND (convert_from(body, 'UTF8')::jsonb #>> '{sender,service}') = ANY($${n}::text[])`;

/** The oldest `limit` claimable rows, whoever wrote them: what a poll or a wake-up naming no rows claims. */
export function claimOutbox(relay: string, limit: number, leaseMs: number, producers?: readonly string[]): Sql {
  return {
    name: producers === undefined ? 'ev_claim_outbox' : 'ev_claim_outbox_as',
    text: leasePicked(`SELECT seq FROM outbox_messages
                    WHERE ${CLAIMABLE}${producers === undefined ? '' : byProducer(4)}
                    ORDER BY seq LIMIT $3::int
                    FOR UPDATE SKIP LOCKED`),
    values: producers === undefined ? [relay, leaseMs, limit] : [relay, leaseMs, limit, producers],
  };
}

/**
 * The claimable rows among `messageIds` (rows a commit named, outboxWake.ts), each found by one
 * probe of the message-id key, whatever the table's size or history:
 * - one LATERAL probe per id: a connection keeps the generic plan it built while the table was
 *   small, and `message_id = ANY(…)` was then planned as a scan of the whole table (seen at half
 *   load: 300–480 buffers a claim once the table held 2,500 rows);
 * - `(…) IS TRUE` is CLAIMABLE's test written so the planner cannot match it to
 *   `outbox_unpublished_idx`: that index keeps an entry for every row published since the last
 *   vacuum (the full claim reads them: 1,325 buffers for no row after a half-load run), while its
 *   statistics show it small;
 * - the ids are walked by subscript, not `unnest`: unnest's row estimate is the length of the
 *   array it is given, so every custom plan looked cheaper than the generic one (which assumes
 *   ten) and the claim was planned anew at every call (0.3 ms each, 758 plans in 756 calls at
 *   half load). generate_subscripts estimates the same rows whatever the array, so after its
 *   first five executions the connection keeps the generic plan.
 */
export function claimOutboxByIds(relay: string, messageIds: readonly string[], leaseMs: number, producers?: readonly string[]): Sql {
  return {
    name: producers === undefined ? 'ev_claim_outbox_ids' : 'ev_claim_outbox_ids_as',
    text: leasePicked(`SELECT x.seq FROM generate_subscripts($3::uuid[], 1) AS m(i)
                    CROSS JOIN LATERAL (
                      SELECT seq FROM outbox_messages
                       WHERE message_id = ($3::uuid[])[m.i] AND (published_at IS NULL) IS TRUE AND ${LEASE_FREE}${producers === undefined ? '' : byProducer(4)}
                         FOR UPDATE SKIP LOCKED) x`),
    values: producers === undefined ? [relay, leaseMs, messageIds] : [relay, leaseMs, messageIds, producers],
  };
}

export function markPublished(seqs: readonly number[]): Sql {
  return {
    name: 'ev_mark_published',
    text: `UPDATE outbox_messages SET published_at = now(), claimed_until = NULL
            WHERE seq = ANY($1::bigint[]) AND published_at IS NULL`,
    values: [seqs],
  };
}

/** Give rows back after a failed publish so any relay may retry them at once. */
export function releaseOutbox(seqs: readonly number[]): Sql {
  return {
    text: 'UPDATE outbox_messages SET claimed_until = NULL, claimed_by = NULL WHERE seq = ANY($1::bigint[]) AND published_at IS NULL',
    values: [seqs],
  };
}

export function outboxLag(): Sql {
  return {
    name: 'ev_outbox_lag',
    text: `SELECT count(*)::int AS pending,
                  COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS lag_seconds
             FROM outbox_messages WHERE published_at IS NULL`,
  };
}
