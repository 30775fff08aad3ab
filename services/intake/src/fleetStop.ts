/**
 * The fleet-wide stop's operator API (seed 004 §7; role `operator`):
 *
 *   GET  /v1/fleet/stop    {"stops": [{kind, active, reason, changedBy, changedAt}]}
 *   POST /v1/fleet/stop    {"kind": "hard"|"soft", "reason": "…"}   → 200 the stops now
 *   POST /v1/fleet/resume  {"kind"?: "hard"|"soft" (default both), "reason"?}
 *                          → 200 {lifted, resumedTasks, more, releasedDispatches, stops}
 *
 * A soft stop: `openCase` refuses every new case (the store's `admitNewCase`) while it is in force (`fleet_stopped`, 503 —
 * API, webhooks; a mailbox keeps its cursor, a schedule its due slots, until resume), and the
 * turn-worker parks running tasks at their next checkpoint. A resume of it sends `task.resume`
 * to every task that stop parked (the per-case soft stop's wake), in the unit of work that lifts
 * it: the park and the lift serialise on the stop row, so no task parks unseen after the lift.
 * A hard stop: the execution coordinator reserves no new dispatch (it stays pending); resuming
 * it nudges the dispatchers.
 */
import type { ServerResponse } from 'node:http';
import { isOneOf, operatorActionOf } from '@everdict/contracts';
import type { EverdictError } from '@everdict/contracts';
import { RequestError, sendError, sendJson } from '@everdict/http-api';
import type { Principal } from '@everdict/http-api';
import { DISPATCH_CHANNEL, FLEET_STOP_KINDS, enqueuePlatformMessage, fleetParkedTasks, loadFleetStops, notifyAtCommit, releaseHeldDispatches, resumeFleet, stopFleet } from '@everdict/store';
import type { FleetStopKind, FleetStopRow, Queryable, Store } from '@everdict/store';
import { INTAKE_SERVICE } from './open.js';

const FLEET_STOP_ROLE = 'operator';
const MAX_REASON = 2000;
/** Tasks one resume wakes; more than this is reported (`more: true`) and a second resume wakes the rest. */
const RESUME_BATCH = 10_000;

/** The HTTP reply for a `fleet_stopped` refusal: 503, retry later. */
export function sendFleetStopped(res: ServerResponse, err: EverdictError): void {
  res.setHeader('retry-after', '60');
  sendError(res, 503, 'fleet_stopped', err.message);
}

function stopView(r: FleetStopRow): Record<string, unknown> {
  return { kind: r.kind, active: r.active, reason: r.reason, changedBy: r.changed_by, changedAt: r.changed_at?.toISOString() ?? null };
}

function kindOf(v: unknown, required: boolean): FleetStopKind | undefined {
  if (v === undefined && !required) return undefined;
  if (!isOneOf(FLEET_STOP_KINDS, v)) throw new RequestError(400, 'invalid_body', `kind must be one of ${FLEET_STOP_KINDS.join(', ')}`, 'kind');
  return v;
}

function reasonOf(v: unknown, required: boolean): string | null {
  if ((v === undefined || v === null) && !required) return null;
  if (typeof v !== 'string' || v.trim().length === 0 || v.length > MAX_REASON) throw new RequestError(400, 'invalid_body', `reason must be a non-empty string of at most ${MAX_REASON} characters`, 'reason');
  return v;
}

/** Routes /v1/fleet/stop and /v1/fleet/resume; false for any other path. */
export async function fleetStopRoute(store: Store, principal: Principal, action: string, method: string, body: () => Promise<Record<string, unknown>>, res: ServerResponse): Promise<boolean> {
  if (action !== 'stop' && action !== 'resume') return false;
  const allowed = action === 'stop' ? ['GET', 'POST'] : ['POST'];
  if (!allowed.includes(method)) return (sendError(res, 405, 'method_not_allowed', `${method} is not allowed here`), true);
  if (!principal.roles.includes(FLEET_STOP_ROLE)) return (sendError(res, 403, 'forbidden', `the fleet stop needs the role ${FLEET_STOP_ROLE}`), true);
  if (method === 'GET') return (sendJson(res, 200, { stops: (await loadFleetStops(store.db)).map(stopView) }), true);
  const b = await body();
  if (action === 'stop') {
    const kind = kindOf(b['kind'], true)!;
    const reason = reasonOf(b['reason'], true)!;
    await store.unitOfWork((uow) => stopFleet(uow, kind, reason, principal.id));
    return (sendJson(res, 200, { stops: (await loadFleetStops(store.db)).map(stopView) }), true);
  }
  const kind = kindOf(b['kind'], false);
  const reason = reasonOf(b['reason'], false);
  const out = await store.unitOfWork(async (uow) => {
    const lifted = await resumeFleet(uow, kind ? [kind] : FLEET_STOP_KINDS, reason, principal.id);
    let tasks: { id: string; case_id: string }[] = [];
    if (lifted.includes('soft')) {
      // After the UPDATE above: every park under the stop has committed (it held the row FOR SHARE).
      tasks = await fleetParkedTasks(uow, RESUME_BATCH);
      for (const t of tasks) {
        const messageId = await enqueuePlatformMessage(uow, INTAKE_SERVICE, 'task.resume', t.case_id, { taskId: t.id, requestedBy: principal.id, ...(reason ? { reason } : {}) });
        // The operator action the receiver looks for (§4), in the case's ledger, with the message.
        const action = operatorActionOf('task.resume', { taskId: t.id }, messageId)!;
        await uow.appendLedger(t.case_id, { kind: action.kind, body: { ...action.match, requestedBy: principal.id, fleetStop: true } });
      }
    }
    let releasedDispatches = 0;
    if (lifted.includes('hard')) {
      releasedDispatches = await releaseHeldDispatches(uow);
      await notifyAtCommit(uow, DISPATCH_CHANNEL);
    }
    return { lifted, resumedTasks: tasks.length, more: tasks.length === RESUME_BATCH, releasedDispatches };
  });
  sendJson(res, 200, { ...out, stops: (await loadFleetStops(store.db)).map(stopView) });
  return true;
}

/** The fleet stops for GET /v1/fleet. */
export async function fleetStopsView(db: Queryable): Promise<Record<string, unknown>[]> {
  return (await loadFleetStops(db)).map(stopView);
}
