/**
 * GRANTS statements. A grant is bound to one packet digest, issued with an expiry on the
 * DATABASE clock, reserved by exactly one journal call (`reserved_call_id` is unique) and then
 * consumed. Every transition names the state it leaves, so a second use updates nothing.
 */
import type { GrantState } from '@everdict/contracts';
import type { Sql } from '../db.js';

export interface GrantRow {
  id: string;
  case_id: string;
  gate_id: string | null;
  task_id: string | null;
  packet_digest: string;
  state: GrantState;
  reserved_call_id: string | null;
  issued_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
  consumed_at: Date | null;
  revoke_reason: string | null;
  /** Computed on the database clock when the row was read. */
  expired: boolean;
}

const GRANT_COLUMNS = `id, case_id, gate_id, task_id, packet_digest, state, reserved_call_id, issued_at, expires_at, revoked_at,
  consumed_at, revoke_reason, (expires_at <= now()) AS expired`;

export function insertGrant(g: { id: string; caseId: string; gateId: string; taskId: string; packetDigest: string; ttlMs: number }): Sql {
  return {
    text: `INSERT INTO grants (id, case_id, gate_id, task_id, packet_digest, expires_at)
           VALUES ($1::uuid, $2::uuid, $3::uuid, $4::uuid, $5::text, now() + make_interval(secs => $6::double precision / 1000))
        RETURNING ${GRANT_COLUMNS}`,
    values: [g.id, g.caseId, g.gateId, g.taskId, g.packetDigest, g.ttlMs],
  };
}

export function selectGrant(id: string, lock = false): Sql {
  return { text: `SELECT ${GRANT_COLUMNS} FROM grants WHERE id = $1::uuid${lock ? ' FOR UPDATE' : ''}`, values: [id] };
}

export function selectGrantByGate(gateId: string): Sql {
  return { text: `SELECT ${GRANT_COLUMNS} FROM grants WHERE gate_id = $1::uuid`, values: [gateId] };
}

/**
 * Reserves an issued, unexpired, unrevoked grant for one journal call. A grant that is already
 * reserved (by any call), consumed, expired or revoked is not touched: zero rows is a refusal.
 */
export function reserveGrant(id: string, callId: string): Sql {
  return {
    text: `UPDATE grants SET state = 'reserved', reserved_call_id = $2::uuid
            WHERE id = $1::uuid AND state = 'issued' AND revoked_at IS NULL AND expires_at > now()
        RETURNING id`,
    values: [id, callId],
  };
}

/** The call that reserved the grant spends it once its outcome is conclusive. */
export function consumeGrant(id: string, callId: string): Sql {
  return {
    text: `UPDATE grants SET state = 'consumed', consumed_at = now()
            WHERE id = $1::uuid AND state = 'reserved' AND reserved_call_id = $2::uuid
        RETURNING id`,
    values: [id, callId],
  };
}

/**
 * Revocation. An issued grant becomes 'revoked'; a reserved one keeps its call (the effect may be
 * in flight and is reconciled) but carries `revoked_at`, so no further attempt is dispatched.
 */
export function revokeGrant(id: string, reason: string): Sql {
  return {
    text: `UPDATE grants SET revoked_at = now(), revoke_reason = $2::text,
                  state = CASE WHEN state = 'issued' THEN 'revoked' ELSE state END
            WHERE id = $1::uuid AND revoked_at IS NULL AND state IN ('issued', 'reserved')
        RETURNING id, state`,
    values: [id, reason],
  };
}

/** An issued grant whose expiry passed, or that is being refused for expiry, becomes 'expired'. */
export function expireGrant(id: string): Sql {
  return { text: `UPDATE grants SET state = 'expired' WHERE id = $1::uuid AND state = 'issued' AND expires_at <= now() RETURNING id`, values: [id] };
}

/** Issued grants past their expiry, locked for this unit of work. */
export function expireDueGrants(limit: number): Sql {
  return {
    text: `WITH due AS (
             SELECT id FROM grants WHERE state = 'issued' AND expires_at <= now()
              ORDER BY expires_at LIMIT $1::int FOR UPDATE SKIP LOCKED
           )
           UPDATE grants g SET state = 'expired' FROM due WHERE g.id = due.id
        RETURNING g.id, g.case_id, g.gate_id, g.task_id, g.packet_digest`,
    values: [limit],
  };
}
