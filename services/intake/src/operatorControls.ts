/**
 * An operator's controls over a running case (role `operator`; ownership checked by the router
 * first, so a case the principal may not see is a 404, never a 403):
 *
 *   POST /v1/cases/:id/resume   {"reason"?}
 *        the way back from a soft stop (§7): the case's soft stop is lifted and `task.resume`
 *        goes to the root task — the turn-worker withdraws its soft-cancel request and wakes it
 *        if it parked on it. A hard stop is final (409); a hard cancel is the other way out.
 *   POST /v1/cases/:id/top-up   {"budget": {"maxTurns"?, "maxToolCalls"?, "maxTokens"?, "maxActiveMinutes"?}, "taskId"?, "reason"?}
 *        a budget top-up (§11.4): `budget.topped_up` to the task (default the root task); a
 *        task parked `budget` wakes.
 *
 * Both are operator actions: only the case's controller runs them (sessions.ts, 403
 * `not_controller` otherwise); a resume moves a stopped session to `resumed`.
 *
 * Intake only authenticates, checks role and ownership and enqueues — in one unit of work with
 * the ledger record; the turn-worker applies the message under its own dedup.
 */
import type { ServerResponse } from 'node:http';
import { isUuid } from '@everdict/contracts';
import { RequestError, sendError, sendJson } from '@everdict/http-api';
import type { Principal } from '@everdict/http-api';
import { enqueuePlatformMessage, liftSoftStop, rootTaskOf, setSessionState, taskOfCase } from '@everdict/store';
import type { CaseRow, Store } from '@everdict/store';
import { INTAKE_SERVICE } from './open.js';
import { operateAs } from './sessions.js';

const OPERATOR_CONTROL_ROLE = 'operator';

const FINISHED = new Set(['cancelled', 'closed', 'resolved']);

const TOP_UP_LIMITS = {
  maxTurns: { integer: true, max: 100_000 },
  maxToolCalls: { integer: true, max: 1_000_000 },
  maxTokens: { integer: true, max: 1_000_000_000 },
  maxActiveMinutes: { integer: false, max: 100_000 },
} as const;
type TopUpKey = keyof typeof TOP_UP_LIMITS;

function reasonOf(body: Record<string, unknown>): string | undefined {
  const v = body['reason'];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' || v.length > 2000) throw new RequestError(400, 'invalid_body', 'reason must be a string of at most 2000 characters', 'reason');
  return v;
}

function checkOperator(principal: Principal, res: ServerResponse, what: string): boolean {
  if (principal.roles.includes(OPERATOR_CONTROL_ROLE)) return true;
  sendError(res, 403, 'forbidden', `${what} needs the role ${OPERATOR_CONTROL_ROLE}`);
  return false;
}

/** The top-up amounts, validated field by field (each limit grows; none shrinks). */
function parseTopUp(v: unknown): Partial<Record<TopUpKey, number>> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new RequestError(400, 'invalid_body', 'budget must be an object of limits to raise', 'budget');
  const out: Partial<Record<TopUpKey, number>> = {};
  for (const [k, n] of Object.entries(v)) {
    if (!Object.hasOwn(TOP_UP_LIMITS, k)) throw new RequestError(400, 'invalid_body', `budget.${k} is not a budget limit (${Object.keys(TOP_UP_LIMITS).join(', ')})`, `budget.${k}`);
    const lim = TOP_UP_LIMITS[k as TopUpKey];
    if (typeof n !== 'number' || !Number.isFinite(n) || n <= 0 || n > lim.max || (lim.integer && !Number.isInteger(n))) {
      throw new RequestError(400, 'invalid_body', `budget.${k} must be a positive ${lim.integer ? 'integer' : 'number'} of at most ${lim.max}`, `budget.${k}`);
    }
    out[k as TopUpKey] = n;
  }
  if (Object.keys(out).length === 0) throw new RequestError(400, 'invalid_body', 'budget must raise at least one limit', 'budget');
  return out;
}

export async function resumeCase(store: Store, principal: Principal, row: CaseRow, body: Record<string, unknown>, res: ServerResponse): Promise<void> {
  if (!checkOperator(principal, res, 'resuming a case')) return;
  const reason = reasonOf(body);
  // A cancelled case was hard-stopped: say the specific, final reason rather than "finished".
  if (row.state === 'cancelled') return sendError(res, 409, 'hard_stop', 'the case is cancelled by a hard stop, which is final; it cannot be resumed');
  if (FINISHED.has(row.state)) throw new RequestError(409, 'case_finished', `the case is already ${row.state}`);
  const result = await store.unitOfWork(async (uow) => {
    const session = await operateAs(uow, row.id, principal);
    // Serialises with cancels on the case row: a hard stop is never lifted.
    const lift = await liftSoftStop(uow, row.id);
    if (lift.refused) return { refused: true as const };
    if (session?.state === 'stopped') await setSessionState(uow, row.id, 'resumed', 'case_resume', principal.id);
    const root = await rootTaskOf(uow, row.id);
    const messageId = root ? await enqueuePlatformMessage(uow, INTAKE_SERVICE, 'task.resume', row.id, { taskId: root, requestedBy: principal.id, ...(reason ? { reason } : {}) }) : null;
    await uow.appendLedger(row.id, { kind: 'case_resume_requested', body: { requestedBy: principal.id, previousStopMode: lift.previous, rootTaskId: root, messageId } });
    return { refused: false as const, root, messageId };
  });
  if (result.refused) return sendError(res, 409, 'hard_stop', 'the case is under hard stop, which is final; it cannot be resumed');
  sendJson(res, 202, { caseId: row.id, rootTaskId: result.root, stopMode: null, messageId: result.messageId });
}

export async function topUpCase(store: Store, principal: Principal, row: CaseRow, body: Record<string, unknown>, res: ServerResponse): Promise<void> {
  if (!checkOperator(principal, res, 'topping up a budget')) return;
  const budget = parseTopUp(body['budget']);
  const reason = reasonOf(body);
  const named = body['taskId'];
  if (named !== undefined && (typeof named !== 'string' || !isUuid(named))) throw new RequestError(400, 'invalid_body', 'taskId must be a task id of the case', 'taskId');
  if (FINISHED.has(row.state)) throw new RequestError(409, 'case_finished', `the case is already ${row.state}`);
  const result = await store.unitOfWork(async (uow) => {
    await operateAs(uow, row.id, principal);
    const taskId = named === undefined ? await rootTaskOf(uow, row.id) : await taskOfCase(uow, row.id, named);
    if (taskId === null) return null;
    const messageId = await enqueuePlatformMessage(uow, INTAKE_SERVICE, 'budget.topped_up', row.id, { taskId, budget, toppedUpBy: principal.id, ...(reason ? { reason } : {}) });
    await uow.appendLedger(row.id, { kind: 'budget_top_up_requested', body: { taskId, budget, requestedBy: principal.id, messageId } });
    return { taskId, messageId };
  });
  if (result === null) return sendError(res, 404, 'task_not_found', 'no such task in the case', 'taskId');
  sendJson(res, 202, { caseId: row.id, taskId: result.taskId, budget, messageId: result.messageId });
}
