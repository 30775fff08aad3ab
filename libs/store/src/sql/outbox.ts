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

export function notifyOutbox(): Sql {
  return { text: `SELECT pg_notify('${OUTBOX_CHANNEL}', '')` };
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

/**
 * With `producers`: a relay holding broker credentials for only some services claims only the
 * rows those services enqueued, read from the envelope's sender.service in the row's body (the
 * service that wrote the row stamped it), so it never holds a row it cannot publish.
 */
export function claimOutbox(relay: string, limit: number, leaseMs: number, producers?: readonly string[]): Sql {
  const byProducer = producers === undefined ? '' : `\n                      AND (convert_from(body, 'UTF8')::jsonb #>> '{sender,service}') = ANY($4::text[])`;
  return {
    name: producers === undefined ? 'ev_claim_outbox' : 'ev_claim_outbox_as',
    text: `UPDATE outbox_messages o
              SET claimed_by = $1::text,
                  claimed_until = now() + make_interval(secs => $3::double precision / 1000),
                  attempts = o.attempts + 1
             FROM (SELECT seq FROM outbox_messages
                    WHERE published_at IS NULL AND (claimed_until IS NULL OR claimed_until < now())${byProducer}
                    ORDER BY seq LIMIT $2::int
                    FOR UPDATE SKIP LOCKED) pick
            WHERE o.seq = pick.seq
        RETURNING o.seq, o.message_id, o.type, o.routing_key, o.body, o.created_at, o.traceparent`,
    values: producers === undefined ? [relay, limit, leaseMs] : [relay, limit, leaseMs, producers],
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
