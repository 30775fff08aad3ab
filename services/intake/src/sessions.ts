/**
 * Session control on the intake API (seed 004 §11.1; libs/store sessions.ts holds the records):
 *
 *   POST /v1/cases/:id/session/takeover   {"reason"}   (role `operator`)
 *        hands the case's session to the caller: a `session_handover` ledger record
 *        {from, to, reason} and a NOTIFY to the previous controller, in one unit of work.
 *
 * Every operator action on a case (cancel, resume, top-up, answer) runs `operateAs` first in
 * its own unit of work. The first principal WITH the `operator` role to act becomes the
 * controller (the opener does not: a case opened by mail or webhook has no principal, and a
 * customer's own cancel or answer is not operating the session). Once a case has a controller,
 * any other principal — customer, role holder or operator — gets 403 `not_controller` naming
 * it, and the action writes nothing (the unit of work rolls back). Viewing never needs control.
 */
import type { ServerResponse } from 'node:http';
import { RequestError, sendError, sendJson } from '@everdict/http-api';
import type { Principal } from '@everdict/http-api';
import { checkControlIfAny, requireControl, takeOverSession } from '@everdict/store';
import type { CaseRow, SessionRow, Store, UnitOfWork } from '@everdict/store';

/** The role a takeover needs. */
export const TAKEOVER_ROLE = 'operator';

/** Thrown inside an action's unit of work when the principal does not control the case. */
export class NotController extends Error {
  constructor(readonly caseId: string, readonly controller: string) {
    super(`case ${caseId} is operated by ${controller}; a principal with the role ${TAKEOVER_ROLE} may take the session over (POST /v1/cases/${caseId}/session/takeover)`);
  }
}

export function sendNotController(res: ServerResponse, err: NotController): void {
  sendJson(res, 403, { error: 'not_controller', message: err.message, controller: err.controller });
}

/**
 * The control check of an operator action: an operator claims control on its first action and
 * gets the session; anyone else acts only while the case has no controller (undefined).
 */
export async function operateAs(uow: UnitOfWork, caseId: string, principal: Principal): Promise<SessionRow | undefined> {
  if (principal.roles.includes(TAKEOVER_ROLE)) {
    const r = await requireControl(uow, caseId, principal.id);
    if (!r.ok) throw new NotController(caseId, r.controller);
    return r.session;
  }
  const r = await checkControlIfAny(uow, caseId, principal.id);
  if (!r.ok) throw new NotController(caseId, r.controller);
  return undefined;
}

/** The session as the case view shows it; a case no operator has operated has no controller yet. */
export function sessionView(row: CaseRow, s: SessionRow | undefined) {
  if (s === undefined) return { state: row.stop_mode === null ? 'live' : 'stopped', controller: null, since: (row.stop_mode === null ? row.created_at : row.updated_at).toISOString() };
  return { state: s.state, controller: s.controller, since: s.since.toISOString() };
}

export async function takeoverRoute(store: Store, principal: Principal, row: CaseRow, body: Record<string, unknown>, res: ServerResponse): Promise<void> {
  if (!principal.roles.includes(TAKEOVER_ROLE)) return sendError(res, 403, 'forbidden', `taking over a session needs the role ${TAKEOVER_ROLE}`);
  const reason = body['reason'];
  if (typeof reason !== 'string' || reason.trim().length === 0 || reason.length > 2000) throw new RequestError(400, 'invalid_body', 'reason must be a non-empty string of at most 2000 characters', 'reason');
  const r = await store.unitOfWork((uow) => takeOverSession(uow, row.id, principal.id, reason));
  sendJson(res, 200, {
    caseId: row.id,
    handedOver: r.kind === 'taken',
    from: r.kind === 'taken' ? r.from : principal.id,
    session: sessionView(row, r.session),
  });
}
