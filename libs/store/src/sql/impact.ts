/**
 * IMPACT_CLAIMS statements (seed 004 §7, §11.5). One live holder per impact key. Keys are
 * claimed in sorted order inside the reservation unit of work (so two claimers never deadlock)
 * and released only once the holding call's outcome is conclusive: a lease expiry or an unknown
 * outcome never releases a key.
 */
import type { Sql } from '../db.js';

/**
 * Claims one key for a call. Returns the key when it is now (or already) held by this call;
 * returns nothing when another call holds it.
 */
export function claimImpactKey(c: { impactKey: string; caseId: string; taskId: string; callId: string }): Sql {
  return {
    text: `INSERT INTO impact_claims (impact_key, case_id, task_id, call_id) VALUES ($1::text, $2::uuid, $3::uuid, $4::uuid)
           ON CONFLICT (impact_key) DO UPDATE SET claimed_at = impact_claims.claimed_at
            WHERE impact_claims.call_id = EXCLUDED.call_id
        RETURNING impact_key`,
    values: [c.impactKey, c.caseId, c.taskId, c.callId],
  };
}

export interface ImpactHolderRow {
  impact_key: string;
  case_id: string;
  task_id: string;
  call_id: string | null;
  claimed_at: Date;
}

export function selectImpactHolder(impactKey: string): Sql {
  return { text: 'SELECT * FROM impact_claims WHERE impact_key = $1::text', values: [impactKey] };
}

/** Releases every key the call holds; returns the released keys. */
export function releaseImpactKeys(callId: string): Sql {
  return { text: 'DELETE FROM impact_claims WHERE call_id = $1::uuid RETURNING impact_key', values: [callId] };
}

/** Dispatches parked on any of `keys` become pending again (they re-run the whole §5 sequence). */
export function wakeImpactWaiters(keys: readonly string[]): Sql {
  return {
    text: `UPDATE effect_dispatches SET state = 'pending', waiting_key = NULL, next_at = now(), updated_at = now()
            WHERE state = 'coordination' AND waiting_key = ANY($1::text[])
        RETURNING grant_id`,
    values: [keys],
  };
}

/**
 * The backstop for a release that committed between a waiter's failed claim and its parking:
 * waiters whose key nobody holds any more become pending again.
 */
export function wakeOrphanedWaiters(limit: number): Sql {
  return {
    text: `WITH free AS (
             SELECT d.grant_id FROM effect_dispatches d
              WHERE d.state = 'coordination'
                AND NOT EXISTS (SELECT 1 FROM impact_claims c WHERE c.impact_key = d.waiting_key)
              LIMIT $1::int FOR UPDATE SKIP LOCKED
           )
           UPDATE effect_dispatches d SET state = 'pending', waiting_key = NULL, next_at = now(), updated_at = now()
             FROM free WHERE d.grant_id = free.grant_id
        RETURNING d.grant_id`,
    values: [limit],
  };
}
