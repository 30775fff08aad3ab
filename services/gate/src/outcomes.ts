/**
 * The human path for an effect call in doubt (seed 004 §7):
 *
 *   POST /v1/effects/:callId/outcome  {"outcome": "applied"|"not_applied"|"partly_applied", "evidence", "proof"?}
 *
 * Who may record: a principal with the `operator` role, or one holding a role that decided the
 * call's gate (the effect class's deciding role) — the same rule as revoking that gate — and who
 * may see the case's customer (otherwise the call is "not found"). `proof` is the id of a paper
 * of the same case. Only a conclusive outcome settles the call (keys released, task woken);
 * `partly_applied` is ledgered and keeps the keys held for an operator.
 * Session control (seed 004 §11.1): when the case has a controller, only it records (403
 * `not_controller` naming it otherwise); a case nobody operates takes any such role holder.
 */
import type { Principal, PrincipalDirectory, WebSessionLookup } from '@everdict/http-api';
import { RequestError, authenticateRequest, readJsonObject, seesCustomer, sendError, sendJson, sendRequestError } from '@everdict/http-api';
import { isOneOf, isUuid, newId, systemClock } from '@everdict/contracts';
import type { RouteHandler } from '@everdict/service-kit';
import { OPERATOR_OUTCOMES, checkControlIfAny, gateOfEffectCall, recordOperatorOutcome } from '@everdict/store';
import type { GateRow, OperatorOutcome, Store } from '@everdict/store';

interface OutcomeApiOptions {
  readonly store: Store;
  readonly principals: () => PrincipalDirectory;
  /** Console sessions (cookie sign-in); absent: bearer tokens only. */
  readonly webSessions?: WebSessionLookup | undefined;
  readonly maxBodyBytes?: number;
}

export const OUTCOME_ROLE = 'operator';

/** Pure: whether the principal may record the outcome of a call approved on `gate`. */
export function mayRecordOutcome(principal: Principal, gate: Pick<GateRow, 'customer' | 'required_decisions'>): 'yes' | 'hidden' | 'forbidden' {
  if (!seesCustomer(principal, gate.customer)) return 'hidden';
  if (principal.roles.includes(OUTCOME_ROLE) || gate.required_decisions.some((d) => principal.roles.includes(d.role))) return 'yes';
  return 'forbidden';
}

function outcomeInput(body: Record<string, unknown>): { outcome: OperatorOutcome; evidence: string; proof?: string } {
  const { outcome, evidence, proof } = body;
  if (!isOneOf(OPERATOR_OUTCOMES, outcome)) throw new RequestError(400, 'invalid_body', `outcome must be one of ${OPERATOR_OUTCOMES.join(', ')}`, 'outcome');
  if (typeof evidence !== 'string' || evidence.trim().length === 0 || evidence.length > 4000) throw new RequestError(400, 'invalid_body', 'evidence must be a non-empty string of at most 4000 characters', 'evidence');
  if (proof !== undefined && (typeof proof !== 'string' || !isUuid(proof))) throw new RequestError(400, 'invalid_body', 'proof must be a paper id', 'proof');
  return { outcome: outcome as OperatorOutcome, evidence, ...(proof === undefined ? {} : { proof: proof as string }) };
}

export function outcomeApi(opts: OutcomeApiOptions): RouteHandler {
  const maxBody = opts.maxBodyBytes ?? 64 * 1024;
  return async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://gate.invalid');
    const parts = url.pathname.split('/').filter(Boolean);
    if (parts[0] !== 'v1' || parts[1] !== 'effects') return false;
    const principal = await authenticateRequest(req, res, opts.principals(), opts.webSessions);
    if (!principal) return true;
    try {
      if (parts.length !== 4 || parts[3] !== 'outcome') return (sendError(res, 404, 'not_found', 'no such route'), true);
      if (req.method !== 'POST') return (sendError(res, 405, 'method_not_allowed', `${req.method ?? ''} is not allowed here`), true);
      const callId = parts[2]!;
      if (!isUuid(callId)) return (sendError(res, 404, 'effect_not_found', 'no such effect call'), true);
      const input = outcomeInput(await readJsonObject(req, maxBody));
      const gate = await gateOfEffectCall(opts.store.db, callId);
      const access = gate === undefined ? 'hidden' : mayRecordOutcome(principal, gate);
      if (access === 'hidden') return (sendError(res, 404, 'effect_not_found', 'no such effect call'), true);
      if (access === 'forbidden') return (sendError(res, 403, 'role_required', `recording an outcome needs role ${OUTCOME_ROLE} or a role that decided this effect`), true);
      const result = await opts.store.unitOfWork(async (uow) => {
        const control = await checkControlIfAny(uow, gate!.case_id, principal.id);
        if (!control.ok) return { kind: 'not_controller' as const, controller: control.controller };
        return recordOperatorOutcome(uow, { id: newId(), callId, outcome: input.outcome, principal: principal.id, evidence: input.evidence, ...(input.proof === undefined ? {} : { proofPaperId: input.proof }), observedAt: systemClock.now().toISOString() });
      });
      switch (result.kind) {
        case 'not_controller':
          return (sendJson(res, 403, { error: 'not_controller', message: `the case is operated by ${result.controller}; a principal with the role operator may take the session over`, controller: result.controller }), true);
        case 'not_found':
          return (sendError(res, 404, 'effect_not_found', 'no such effect call'), true);
        case 'not_unknown':
          return (sendError(res, 409, 'outcome_not_unknown', `the call is not in doubt (${result.status}); nothing was recorded`), true);
        case 'proof_not_found':
          return (sendError(res, 422, 'proof_not_found', 'proof names no paper of this case', 'proof'), true);
        case 'recorded':
          return (sendJson(res, 201, { callId, caseId: result.caseId, attempt: result.attempt, outcome: input.outcome, conclusive: result.conclusive, recordedBy: principal.id }), true);
      }
    } catch (err) {
      if (err instanceof RequestError) return (sendRequestError(res, err), true);
      throw err;
    }
  };
}
