/** Fleet-stop statements (§7): the two stop rows, their history, and the work a soft stop parked. */
import type { Sql } from '../db.js';

export type FleetStopKind = 'hard' | 'soft';

export interface FleetStopRow {
  kind: FleetStopKind;
  active: boolean;
  reason: string | null;
  changed_by: string | null;
  changed_at: Date | null;
}

export function selectFleetStops(): Sql {
  return { name: 'ev_fleet_stops', text: 'SELECT kind, active, reason, changed_by, changed_at FROM fleet_stops ORDER BY kind' };
}

/**
 * Whether the stop of `kind` is in force, holding the row FOR SHARE until COMMIT: a stop or a
 * resume (an UPDATE of the row) waits for this unit of work, and this one for theirs.
 */
export function shareFleetStop(kind: FleetStopKind): Sql {
  return { name: 'ev_share_fleet_stop', text: 'SELECT active, reason, changed_by, changed_at FROM fleet_stops WHERE kind = $1::text FOR SHARE', values: [kind] };
}

/** Puts the stop in force (again: a repeated stop records its newer reason). */
export function setFleetStop(kind: FleetStopKind, reason: string, by: string): Sql {
  return {
    text: `UPDATE fleet_stops SET active = true, reason = $2::text, changed_by = $3::text, changed_at = now()
            WHERE kind = $1::text
        RETURNING kind, active, reason, changed_by, changed_at`,
    values: [kind, reason, by],
  };
}

/** Lifts the stop; returns the row only when it was in force. */
export function liftFleetStop(kind: FleetStopKind, reason: string | null, by: string): Sql {
  return {
    text: `UPDATE fleet_stops SET active = false, reason = $2::text, changed_by = $3::text, changed_at = now()
            WHERE kind = $1::text AND active
        RETURNING kind`,
    values: [kind, reason, by],
  };
}

export function insertFleetStopEvent(e: { action: 'stop' | 'resume'; kind: FleetStopKind; reason: string | null; actor: string }): Sql {
  return {
    text: 'INSERT INTO fleet_stop_events (action, kind, reason, actor) VALUES ($1::text, $2::text, $3::text, $4::text)',
    values: [e.action, e.kind, e.reason, e.actor],
  };
}

/**
 * Tasks a fleet soft stop parked: parked on a soft stop (park gate, detail kind soft_cancel)
 * although neither the task nor its case has a soft stop of its own — those stay parked until
 * their own resume.
 */
export function selectFleetParkedTasks(limit: number): Sql {
  return {
    text: `SELECT t.id, t.case_id FROM tasks t JOIN cases c ON c.id = t.case_id
            WHERE t.state = 'parked' AND t.park_reason = 'gate' AND t.park_detail->>'kind' = 'soft_cancel'
              AND t.cancel_requested IS NULL AND c.stop_mode IS NULL
            ORDER BY t.id
            LIMIT $1::int`,
    values: [limit],
  };
}

/** The dispatch detail key marking a dispatch a fleet hard stop holds pending. */
export const FLEET_STOP_HELD_KEY = 'fleetStopHeld';

/** After a hard stop is lifted: every dispatch it held is due now, its mark cleared. */
export function releaseFleetHeldDispatches(): Sql {
  return {
    text: `UPDATE effect_dispatches SET next_at = now(), detail = detail - '${FLEET_STOP_HELD_KEY}', updated_at = now()
            WHERE state = 'pending' AND detail ? '${FLEET_STOP_HELD_KEY}'
        RETURNING grant_id`,
  };
}
