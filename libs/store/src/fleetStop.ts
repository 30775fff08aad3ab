/**
 * The fleet-wide stop (seed 004 §7), durable in FLEET_STOPS (one row per kind) with its history
 * in FLEET_STOP_EVENTS:
 *   hard — the execution coordinator reserves no new dispatch (it leaves them pending); reads,
 *          settling and reconciliation go on;
 *   soft — intake opens no case, and running tasks park at their next checkpoint (the per-case
 *          soft stop's park), woken on resume through the same `task.resume` wake.
 * The checks that must not race a stop or a resume (`fleetStopInForce` inside the unit of work
 * that reserves or parks) hold the kind's row FOR SHARE, so they serialise with its UPDATE.
 */
import { EverdictError } from '@everdict/contracts';
import type { Queryable } from './db.js';
import { insertFleetStopEvent, liftFleetStop, releaseFleetHeldDispatches, selectFleetParkedTasks, selectFleetStops, setFleetStop, shareFleetStop } from './sql/fleetStop.js';
import type { FleetStopKind, FleetStopRow } from './sql/fleetStop.js';
import type { UnitOfWork } from './unitOfWork.js';

export type { FleetStopKind, FleetStopRow } from './sql/fleetStop.js';
export { FLEET_STOP_HELD_KEY } from './sql/fleetStop.js';
export const FLEET_STOP_KINDS: readonly FleetStopKind[] = ['hard', 'soft'];

/** Both stop rows (kind order: hard, soft). */
export async function loadFleetStops(q: Queryable): Promise<FleetStopRow[]> {
  return (await q.query<FleetStopRow>(selectFleetStops())).rows;
}

/** The stop if it is in force (null if not), the row held FOR SHARE until the unit of work ends. */
export async function fleetStopInForce(uow: UnitOfWork, kind: FleetStopKind): Promise<{ reason: string; changedBy: string; changedAt: Date } | null> {
  const row = (await uow.query<Omit<FleetStopRow, 'kind'>>(shareFleetStop(kind))).rows[0];
  return row?.active ? { reason: row.reason ?? '', changedBy: row.changed_by ?? '', changedAt: row.changed_at ?? new Date(0) } : null;
}

/**
 * Refuses a new case while a fleet soft stop is in force (`fleet_stopped`, retryable), inside
 * the unit of work that opens it: an opening committed after the stop's commit never happens.
 */
export async function admitNewCase(uow: UnitOfWork): Promise<void> {
  const stop = await fleetStopInForce(uow, 'soft');
  if (stop) throw new EverdictError('fleet_stopped', `the fleet is under a soft stop and admits no new case: ${stop.reason}`, { retryable: true, details: { reason: stop.reason } });
}

/** Puts the stop in force, recording who and why. */
export async function stopFleet(uow: UnitOfWork, kind: FleetStopKind, reason: string, by: string): Promise<FleetStopRow> {
  const row = (await uow.query<FleetStopRow>(setFleetStop(kind, reason, by))).rows[0];
  if (!row) throw new EverdictError('fleet_stop_missing', `fleet_stops has no ${kind} row (is migration 0007 applied?)`);
  await uow.query(insertFleetStopEvent({ action: 'stop', kind, reason, actor: by }));
  return row;
}

/** Lifts the stops of `kinds` that are in force; returns the kinds it lifted. */
export async function resumeFleet(uow: UnitOfWork, kinds: readonly FleetStopKind[], reason: string | null, by: string): Promise<FleetStopKind[]> {
  const lifted: FleetStopKind[] = [];
  for (const kind of kinds) {
    if ((await uow.query(liftFleetStop(kind, reason, by))).rows.length === 0) continue;
    await uow.query(insertFleetStopEvent({ action: 'resume', kind, reason, actor: by }));
    lifted.push(kind);
  }
  return lifted;
}

/** Makes every dispatch a hard stop held due now; returns how many. */
export async function releaseHeldDispatches(uow: UnitOfWork): Promise<number> {
  return (await uow.query(releaseFleetHeldDispatches())).rows.length;
}

/** Tasks parked by a fleet soft stop (not by a task's or case's own), at most `limit`. */
export async function fleetParkedTasks(q: Queryable, limit: number): Promise<{ id: string; case_id: string }[]> {
  return (await q.query<{ id: string; case_id: string }>(selectFleetParkedTasks(limit))).rows;
}
