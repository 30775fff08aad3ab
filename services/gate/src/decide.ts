/**
 * Recording a verdict, issuing the grant, revoking (seed 004 §5; DESIGN §6, §7).
 *
 * One unit of work per verdict, with the gate row locked, so concurrent verdicts on one gate
 * serialise and exactly one of them sees "all approved" and issues the grant. In that same unit
 * of work: the decision row, the ledger record, the grant and the `gate.decided` message. A
 * refused verdict records nothing — except that a gate found past its expiry is expired on the
 * spot (and the agent told), which is a fact, not the verdict.
 *
 * Each decision is its own row bound to the digest it was given on. One principal holding
 * several roles may answer several decisions; each answer is one request and one row.
 *
 * Session control (seed 004 §11.1): a verdict acts on the gate's case, so once an operator
 * operates that case, any other principal is refused 403 `not_controller` (nothing recorded).
 *
 * A consent gate (K3: one exact egress read, its digest that of the call) goes through the same
 * checks and decision row; its verdict issues no grant and wakes the task parked on it directly.
 */
import { newId, WAKE_RUNNABLE, wakes } from '@everdict/contracts';
import type { GateState, Verdict } from '@everdict/contracts';
import { seesCustomer } from '@everdict/http-api';
import type { Principal } from '@everdict/http-api';
import {
  checkControlIfAny,
  closeGateAs,
  consentOfGate,
  enqueuePlatformMessage,
  isGateExpired,
  issueGrant,
  loadDecisions,
  loadGate,
  loadGrantOfGate,
  lockTask,
  recordDecision,
  revokeGrantNow,
  wakeTask,
} from '@everdict/store';
import type { GateRow, Store, UnitOfWork } from '@everdict/store';
import { SPAN, withSpan } from '@everdict/tracing';
import { pendingDecisions } from './policy.js';
import { GATE_SERVICE } from './requests.js';

interface VerdictInput {
  readonly gateId: string;
  readonly decision: string;
  readonly verdict: Verdict;
  readonly digest: string;
  readonly reason: string | null;
}

/** A refusal names a stable code, the HTTP status and, when one field is at fault, that field. */
interface DecideRefusal {
  readonly ok: false;
  readonly status: 403 | 404 | 409 | 422;
  readonly error: 'gate_not_found' | 'unknown_decision' | 'role_required' | 'not_controller' | 'digest_mismatch' | 'gate_not_open' | 'gate_expired' | 'already_decided';
  readonly message: string;
  readonly field?: string;
}

interface DecideAccepted {
  readonly ok: true;
  readonly status: 200 | 201;
  readonly gateId: string;
  readonly decision: string;
  readonly verdict: Verdict;
  readonly gateState: GateState;
  readonly pending: readonly string[];
  readonly grantId?: string;
  readonly expiresAt?: string;
}

type DecideResult = DecideAccepted | DecideRefusal;

const refuse = (status: DecideRefusal['status'], error: DecideRefusal['error'], message: string, field?: string): DecideRefusal =>
  field === undefined ? { ok: false, status, error, message } : { ok: false, status, error, message, field };

export async function decide(store: Store, principal: Principal, input: VerdictInput, grantTtlMs: number): Promise<DecideResult> {
  return store.unitOfWork((uow) => decideInUnit(uow, principal, input, grantTtlMs));
}

async function decideInUnit(uow: UnitOfWork, principal: Principal, input: VerdictInput, grantTtlMs: number): Promise<DecideResult> {
  const gate = await loadGate(uow, input.gateId, { lock: true });
  if (!gate || !seesCustomer(principal, gate.customer)) return refuse(404, 'gate_not_found', 'no such gate');
  const required = gate.required_decisions.find((d) => d.decision === input.decision);
  if (!required) return refuse(422, 'unknown_decision', `gate ${gate.id} does not need decision ${input.decision}`, 'decision');
  if (!principal.roles.includes(required.role)) return refuse(403, 'role_required', `decision ${input.decision} needs role ${required.role}`, 'decision');
  // Session control (seed 004 §11.1): once an operator operates the case, only it acts on it.
  const control = await checkControlIfAny(uow, gate.case_id, principal.id);
  if (!control.ok) return refuse(403, 'not_controller', `the case is operated by ${control.controller}; a principal with the role operator may take the session over`);
  if (input.digest !== gate.packet_digest) return refuse(409, 'digest_mismatch', 'the digest is not the digest of this gate\'s packet; nothing was recorded', 'digest');

  const prior = (await loadDecisions(uow, [gate.id])).find((d) => d.decision === input.decision);
  if (prior) {
    // The same answer again (a retried request) is acknowledged; a different one is refused.
    if (prior.principal === principal.id && prior.verdict === input.verdict && prior.digest === input.digest) {
      return accepted(200, gate, input, gate.state, await stillPending(uow, gate), await loadGrantOfGate(uow, gate.id));
    }
    return refuse(409, 'already_decided', `decision ${input.decision} was already given`, 'decision');
  }
  if (gate.state !== 'open') return refuse(409, 'gate_not_open', `gate is ${gate.state}`);
  if (await isGateExpired(uow, gate.id)) {
    await expireGate(uow, gate);
    return refuse(409, 'gate_expired', 'the gate expired before this decision; nothing was recorded');
  }

  await recordDecision(uow, {
    id: newId(),
    gateId: gate.id,
    decision: input.decision,
    verdict: input.verdict,
    principal: principal.id,
    role: required.role,
    digest: input.digest,
    reason: input.reason,
  });
  await uow.appendLedger(gate.case_id, {
    kind: 'decision_recorded',
    body: { gateId: gate.id, decision: input.decision, verdict: input.verdict, principal: principal.id, role: required.role, digest: input.digest, reason: input.reason },
  });

  const consent = await consentOfGate(uow, gate.id);
  if (consent !== undefined) return closeConsent(uow, gate, input, principal.id, consent.task_id);

  if (input.verdict === 'reject') {
    const reason = `${input.decision} rejected by ${principal.id}${input.reason ? `: ${input.reason}` : ''}`.slice(0, 2000);
    await closeGateAs(uow, gate.id, 'rejected', reason);
    await uow.appendLedger(gate.case_id, { kind: 'gate_rejected', body: { gateId: gate.id, packetDigest: gate.packet_digest, reason } });
    await waitedFor(gate, 'rejected', () => enqueuePlatformMessage(uow, GATE_SERVICE, 'gate.decided', gate.case_id, { gateId: gate.id, taskId: gate.task_id, packetDigest: gate.packet_digest, outcome: 'rejected', reason }));
    return accepted(201, gate, input, 'rejected', [], undefined);
  }

  const pending = await stillPending(uow, gate);
  if (pending.length > 0) return accepted(201, gate, input, 'open', pending, undefined);

  const grant = await issueGrant(uow, { id: newId(), caseId: gate.case_id, gateId: gate.id, taskId: gate.task_id, packetDigest: gate.packet_digest, ttlMs: grantTtlMs });
  await closeGateAs(uow, gate.id, 'approved', null);
  const expiresAt = grant.expires_at.toISOString();
  await uow.appendLedger(gate.case_id, { kind: 'grant_issued', body: { gateId: gate.id, grantId: grant.id, packetDigest: gate.packet_digest, expiresAt } });
  await waitedFor(gate, 'approved', () =>
    enqueuePlatformMessage(uow, GATE_SERVICE, 'gate.decided', gate.case_id, {
      gateId: gate.id,
      taskId: gate.task_id,
      packetDigest: gate.packet_digest,
      outcome: 'approved',
      grantId: grant.id,
      expiresAt,
    }),
  );
  return accepted(201, gate, input, 'approved', [], grant);
}

/**
 * A consent gate needs its one decision: the verdict closes it (approved or rejected; no grant —
 * the consent admits exactly the call it is bound to, which the turn-worker's hook checks) and
 * wakes the task parked on THIS gate, in the verdict's unit of work.
 */
async function closeConsent(uow: UnitOfWork, gate: GateRow, input: VerdictInput, principalId: string, taskId: string): Promise<DecideResult> {
  const approved = input.verdict === 'approve';
  const reason = approved ? null : `${input.decision} rejected by ${principalId}${input.reason ? `: ${input.reason}` : ''}`.slice(0, 2000);
  const state = approved ? 'approved' : 'rejected';
  await closeGateAs(uow, gate.id, state, reason);
  await uow.appendLedger(gate.case_id, { kind: approved ? 'consent_approved' : 'consent_rejected', body: { gateId: gate.id, taskId, digest: gate.packet_digest, principal: principalId, ...(reason ? { reason } : {}) } });
  const task = await lockTask(uow, taskId);
  const waitsOnIt = task !== undefined && task.state === 'parked' && wakes(task.park_reason, 'consent_decided') && (task.park_detail as { gateId?: unknown } | null)?.gateId === gate.id;
  if (waitsOnIt && (await wakeTask(uow, taskId, 'consent_decided'))) {
    await enqueuePlatformMessage(uow, GATE_SERVICE, 'task.runnable', gate.case_id, { taskId, reason: WAKE_RUNNABLE.consent_decided });
  }
  return accepted(201, gate, input, state, [], undefined);
}

/**
 * The gate's wait — from its request (`created_at`) to the decision closing it now — as a span
 * under the trace the gate was requested in; `fn` (the `gate.decided` enqueue) runs inside it,
 * so the approval and the effect it leads to continue that trace, not the HTTP request's.
 */
function waitedFor<T>(gate: Pick<GateRow, 'id' | 'case_id' | 'task_id' | 'created_at' | 'traceparent'>, outcome: string, fn: () => Promise<T>): Promise<T> {
  return withSpan(SPAN.gateWait, { parent: gate.traceparent, startTime: gate.created_at, attributes: { 'gate.id': gate.id, 'case.id': gate.case_id, 'task.id': gate.task_id, outcome } }, fn);
}

async function stillPending(uow: UnitOfWork, gate: GateRow): Promise<string[]> {
  return pendingDecisions(gate.required_decisions, await loadDecisions(uow, [gate.id]), gate.packet_digest).map((d) => d.decision);
}

function accepted(status: 200 | 201, gate: GateRow, input: VerdictInput, gateState: GateState, pending: readonly string[], grant: { id: string; expires_at: Date } | undefined): DecideAccepted {
  return {
    ok: true,
    status,
    gateId: gate.id,
    decision: input.decision,
    verdict: input.verdict,
    gateState,
    pending,
    ...(grant ? { grantId: grant.id, expiresAt: grant.expires_at.toISOString() } : {}),
  };
}

/** Expires an open gate found past its expiry and tells the agent. */
async function expireGate(uow: UnitOfWork, gate: Pick<GateRow, 'id' | 'case_id' | 'task_id' | 'packet_digest' | 'created_at' | 'traceparent'>): Promise<void> {
  const reason = 'the gate expired before every decision was given';
  if (!(await closeGateAs(uow, gate.id, 'expired', reason))) return;
  await uow.appendLedger(gate.case_id, { kind: 'gate_expired', body: { gateId: gate.id, packetDigest: gate.packet_digest } });
  await waitedFor(gate, 'expired', () => enqueuePlatformMessage(uow, GATE_SERVICE, 'gate.decided', gate.case_id, { gateId: gate.id, taskId: gate.task_id, packetDigest: gate.packet_digest, outcome: 'expired', reason }));
}

type RevokeResult =
  | { readonly ok: true; readonly gateId: string; readonly gateState: 'revoked'; readonly grantId: string | null; readonly grantState: string | null }
  | { readonly ok: false; readonly status: 403 | 404 | 409; readonly error: 'gate_not_found' | 'role_required' | 'not_revocable'; readonly message: string };

/** Roles that may revoke any gate they can see, besides the holders of the gate's own roles. */
const OPERATOR_ROLE = 'operator';

/**
 * Revokes a gate: an open gate closes unapproved; an approved gate's grant is revoked, so the
 * coordinator refuses it at dispatch (an effect already submitted is still reconciled).
 */
export async function revoke(store: Store, principal: Principal, gateId: string, reason: string): Promise<RevokeResult> {
  return store.unitOfWork(async (uow) => {
    const gate = await loadGate(uow, gateId, { lock: true });
    if (!gate || !seesCustomer(principal, gate.customer)) return { ok: false, status: 404, error: 'gate_not_found', message: 'no such gate' };
    const allowed = principal.roles.includes(OPERATOR_ROLE) || gate.required_decisions.some((d) => principal.roles.includes(d.role));
    if (!allowed) return { ok: false, status: 403, error: 'role_required', message: `revoking needs role ${OPERATOR_ROLE} or one of the gate's decision roles` };
    if (gate.state !== 'open' && gate.state !== 'approved') return { ok: false, status: 409, error: 'not_revocable', message: `gate is ${gate.state}` };
    const text = `revoked by ${principal.id}${reason ? `: ${reason}` : ''}`.slice(0, 2000);
    const grant = await loadGrantOfGate(uow, gate.id);
    if (grant?.state === 'consumed') return { ok: false, status: 409, error: 'not_revocable', message: 'the grant was already spent on its effect' };
    const revokedGrant = grant ? await revokeGrantNow(uow, grant.id, text) : undefined;
    await closeGateAs(uow, gate.id, 'revoked', text);
    await uow.appendLedger(gate.case_id, { kind: 'gate_revoked', body: { gateId: gate.id, grantId: grant?.id ?? null, grantState: revokedGrant?.state ?? grant?.state ?? null, by: principal.id, reason: text } });
    await enqueuePlatformMessage(uow, GATE_SERVICE, 'gate.decided', gate.case_id, { gateId: gate.id, taskId: gate.task_id, packetDigest: gate.packet_digest, outcome: 'revoked', reason: text });
    return { ok: true, gateId: gate.id, gateState: 'revoked', grantId: grant?.id ?? null, grantState: revokedGrant?.state ?? grant?.state ?? null };
  });
}
