/**
 * A case's session (seed 004 §11.1): its live execution — live · stopped · resumed · deleted —
 * and the ONE principal that operates it (the controller). Many principals may view a case;
 * only the controller operates it. The first holder of the `operator` role to operate a case
 * becomes its controller (the caller decides who claims: requireControl claims,
 * checkControlIfAny never does); nobody else operates it until a holder of the role takes over, which is a handover recorded in the ledger (`session_handover`,
 * from/to/reason) and announced to the previous controller on SESSION_HANDOVER_CHANNEL at COMMIT.
 *
 * Every write here runs inside the caller's unit of work, so the control check, the action it
 * guards and their ledger records commit together. The session row is locked FIRST in that unit
 * of work (before the ledger head and the case row, which only this module's callers ever take
 * after it), so concurrent claims and takeovers of one case serialise and never deadlock.
 * A session is not tied to a model conversation: turns, tasks and routes come and go under it.
 */
import type { Queryable } from './db.js';
import type { UnitOfWork } from './unitOfWork.js';

export const SESSION_STATES = ['live', 'stopped', 'resumed', 'deleted'] as const;
export type SessionState = (typeof SESSION_STATES)[number];

/** Postgres channel of handovers; the payload is JSON {caseId, from, to, seq} (no reason text). */
export const SESSION_HANDOVER_CHANNEL = 'everdict_session_handover';

export interface SessionRow {
  readonly case_id: string;
  readonly state: SessionState;
  readonly controller: string;
  readonly since: Date;
}

export type ControlDecision = { readonly kind: 'claim' } | { readonly kind: 'controls' } | { readonly kind: 'refused'; readonly controller: string };

/** Pure: whether `principal` may operate a case whose session is `session` (undefined: none yet). */
export function controlDecision(session: Pick<SessionRow, 'controller'> | undefined, principal: string): ControlDecision {
  if (session === undefined) return { kind: 'claim' };
  if (session.controller === principal) return { kind: 'controls' };
  return { kind: 'refused', controller: session.controller };
}

const SELECT_SESSION = 'SELECT case_id::text AS case_id, state, controller, since FROM case_sessions WHERE case_id = $1::uuid';

export async function loadSession(db: Queryable, caseId: string): Promise<SessionRow | undefined> {
  return (await db.query<SessionRow>({ text: SELECT_SESSION, values: [caseId] })).rows[0];
}

async function lockSession(uow: UnitOfWork, caseId: string): Promise<SessionRow | undefined> {
  return (await uow.query<SessionRow>({ text: `${SELECT_SESSION} FOR UPDATE`, values: [caseId] })).rows[0];
}

/**
 * Locks the case's session, creating it controlled by `principal` if the case has none — live,
 * or stopped when the case already carries a stop (a customer's cancel before any controller):
 * the row the caller's check and writes hold until COMMIT. A concurrent creator blocks on the
 * primary key and then reads the winner's row, so exactly one principal ever claims a case.
 */
async function lockOrClaim(uow: UnitOfWork, caseId: string, principal: string): Promise<{ session: SessionRow; claimed: boolean }> {
  const inserted = (
    await uow.query<SessionRow>({
      text: `INSERT INTO case_sessions (case_id, state, controller)
             SELECT c.id, CASE WHEN c.stop_mode IS NULL THEN 'live' ELSE 'stopped' END, $2 FROM cases c WHERE c.id = $1::uuid
             ON CONFLICT (case_id) DO NOTHING
             RETURNING case_id::text AS case_id, state, controller, since`,
      values: [caseId, principal],
    })
  ).rows[0];
  if (inserted) {
    await uow.appendLedger(caseId, { kind: 'session_state', body: { from: null, to: inserted.state, controller: principal, cause: 'first_operator_action' } });
    return { session: inserted, claimed: true };
  }
  const session = await lockSession(uow, caseId);
  if (!session) throw new Error(`case_sessions row of ${caseId} vanished under ON CONFLICT`);
  return { session, claimed: false };
}

export type ControlResult = { readonly ok: true; readonly session: SessionRow; readonly claimed: boolean } | { readonly ok: false; readonly controller: string };

/**
 * The control check of an operator action, inside the action's unit of work: the first
 * principal to operate the case becomes its controller (ledgered); anyone else is refused
 * with the controller's id, and the caller writes nothing.
 */
export async function requireControl(uow: UnitOfWork, caseId: string, principal: string): Promise<ControlResult> {
  const { session, claimed } = await lockOrClaim(uow, caseId, principal);
  const d = controlDecision(claimed ? undefined : session, principal);
  if (d.kind === 'refused') return { ok: false, controller: d.controller };
  return { ok: true, session, claimed };
}

/**
 * A check that never claims: refused only when the case HAS a controller and it is another
 * principal. For actions outside the case's operation proper (e.g. recording an effect's
 * outcome), which a role holder may take on a case nobody operates.
 */
export async function checkControlIfAny(uow: UnitOfWork, caseId: string, principal: string): Promise<{ readonly ok: true } | { readonly ok: false; readonly controller: string }> {
  const session = await lockSession(uow, caseId);
  const d = session === undefined ? undefined : controlDecision(session, principal);
  return d?.kind === 'refused' ? { ok: false, controller: d.controller } : { ok: true };
}

/** Moves the session (locked by requireControl) to `to`; ledgers `session_state` when it changed. */
export async function setSessionState(uow: UnitOfWork, caseId: string, to: SessionState, cause: string, by: string): Promise<boolean> {
  const r = await uow.query<{ from_state: SessionState }>({
    text: `UPDATE case_sessions s SET state = $2, since = now(), updated_at = now()
             FROM (SELECT state AS from_state FROM case_sessions WHERE case_id = $1::uuid) prev
            WHERE s.case_id = $1::uuid AND s.state <> $2
           RETURNING prev.from_state`,
    values: [caseId, to],
  });
  const from = r.rows[0]?.from_state;
  if (from === undefined) return false;
  await uow.appendLedger(caseId, { kind: 'session_state', body: { from, to, cause, by } });
  return true;
}

export type TakeoverResult = { readonly kind: 'taken'; readonly from: string | null; readonly session: SessionRow } | { readonly kind: 'already_controller'; readonly session: SessionRow };

/**
 * Hands the session to `principal` (the caller checked the `operator` role): the controller
 * changes, `session_handover` {from, to, reason} is ledgered, and the previous controller is
 * notified on SESSION_HANDOVER_CHANNEL — Postgres delivers it only if this unit of work commits.
 * The ledger record is the durable notification a console lists for `from`; the NOTIFY wakes it.
 */
export async function takeOverSession(uow: UnitOfWork, caseId: string, principal: string, reason: string): Promise<TakeoverResult> {
  const { session, claimed } = await lockOrClaim(uow, caseId, principal);
  if (claimed) {
    await uow.appendLedger(caseId, { kind: 'session_handover', body: { from: null, to: principal, reason } });
    return { kind: 'taken', from: null, session };
  }
  if (session.controller === principal) return { kind: 'already_controller', session };
  const updated = (
    await uow.query<SessionRow>({
      text: `UPDATE case_sessions SET controller = $2, since = now(), updated_at = now() WHERE case_id = $1::uuid
             RETURNING case_id::text AS case_id, state, controller, since`,
      values: [caseId, principal],
    })
  ).rows[0]!;
  const appended = await uow.appendLedger(caseId, { kind: 'session_handover', body: { from: session.controller, to: principal, reason } });
  await uow.query({
    text: 'SELECT pg_notify($1::text, $2::text)',
    values: [SESSION_HANDOVER_CHANNEL, JSON.stringify({ caseId, from: session.controller, to: principal, seq: appended.seq })],
  });
  return { kind: 'taken', from: session.controller, session: updated };
}
