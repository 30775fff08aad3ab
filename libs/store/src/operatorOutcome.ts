/**
 * A human records what landed for an effect call in doubt (seed 004 §7, issue 13 item 7). One
 * unit of work: the recording (effect_operator_outcomes), a ledger entry naming the principal,
 * and — only for a conclusive outcome — the call's outcome and the dispatch handed to the same
 * settle path WhatLanded uses (the coordinator then releases the impact keys, spends the grant
 * and tells the task). `partly_applied` is not conclusive: the call stays unknown, its keys stay
 * held, and the reconciler stops asking the target and leaves the call to an operator.
 *
 * Who may record is the caller's decision (the API checks roles); this module checks the call.
 */
import type { Queryable } from './db.js';
import { DISPATCH_CHANNEL, loadDispatchOfCall, loadEffectCall, loadGate, moveDispatchTo, notifyAtCommit, recordEffectOutcome } from './effects.js';
import type { GateRow } from './sql/gates.js';
import type { UnitOfWork } from './unitOfWork.js';

export const OPERATOR_OUTCOMES = ['applied', 'not_applied', 'partly_applied'] as const;
export type OperatorOutcome = (typeof OPERATOR_OUTCOMES)[number];

export interface OperatorOutcomeInput {
  readonly id: string;
  readonly callId: string;
  readonly outcome: OperatorOutcome;
  readonly principal: string;
  readonly evidence: string;
  readonly proofPaperId?: string;
  readonly observedAt: string;
}

export type OperatorOutcomeResult =
  | { readonly kind: 'recorded'; readonly caseId: string; readonly attempt: number; readonly conclusive: boolean }
  /** No effect call of that id (or its dispatch or gate is gone). */
  | { readonly kind: 'not_found' }
  /** The call is not in doubt: it settled, or it is still executing. */
  | { readonly kind: 'not_unknown'; readonly status: string }
  | { readonly kind: 'proof_not_found' };

/** The gate an effect call was approved on (roles, customer) — for the caller's access check. */
export async function gateOfEffectCall(q: Queryable, callId: string): Promise<GateRow | undefined> {
  const dispatch = await loadDispatchOfCall(q, callId);
  return dispatch ? loadGate(q, dispatch.gate_id) : undefined;
}

/** Whether the operator parked this attempt as partly applied (the reconciler then stops asking). */
export async function heldForOperator(q: Queryable, callId: string, attempt: number): Promise<boolean> {
  const { rows } = await q.query<{ held: boolean }>({
    text: `SELECT EXISTS (SELECT 1 FROM effect_operator_outcomes WHERE call_id = $1::uuid AND attempt = $2::int AND outcome = 'partly_applied') AS held`,
    values: [callId, attempt],
  });
  return rows[0]?.held === true;
}

export async function recordOperatorOutcome(uow: UnitOfWork, o: OperatorOutcomeInput): Promise<OperatorOutcomeResult> {
  // The row lock orders this against a concurrent WhatLanded answer for the same attempt.
  await uow.query({ text: `SELECT id FROM runtime_calls WHERE id = $1::uuid AND kind = 'effect' FOR UPDATE`, values: [o.callId] });
  const call = await loadEffectCall(uow, o.callId);
  const dispatch = call ? await loadDispatchOfCall(uow, call.id) : undefined;
  if (!call || !dispatch || call.effect_attempt === null) return { kind: 'not_found' };
  if (call.status !== 'unknown' || dispatch.state !== 'reconciling') return { kind: 'not_unknown', status: call.status };
  if (o.proofPaperId !== undefined) {
    const { rows } = await uow.query({ text: 'SELECT 1 FROM papers WHERE id = $1::uuid AND case_id = $2::uuid', values: [o.proofPaperId, dispatch.case_id] });
    if (rows.length === 0) return { kind: 'proof_not_found' };
  }
  const attempt = call.effect_attempt;
  const conclusive = o.outcome !== 'partly_applied';
  await uow.query({
    text: `INSERT INTO effect_operator_outcomes (id, call_id, case_id, attempt, outcome, principal, evidence, proof_paper_id)
           VALUES ($1::uuid, $2::uuid, $3::uuid, $4::int, $5::text, $6::text, $7::text, $8::uuid)`,
    values: [o.id, call.id, dispatch.case_id, attempt, o.outcome, o.principal, o.evidence, o.proofPaperId ?? null],
  });
  await uow.appendLedger(dispatch.case_id, {
    kind: 'effect_outcome_recorded',
    body: { grantId: dispatch.grant_id, callId: call.id, attempt, outcome: o.outcome, principal: o.principal, evidence: o.evidence, proofPaperId: o.proofPaperId ?? null, conclusive },
  });
  if (!conclusive) {
    await moveDispatchTo(uow, { grantId: dispatch.grant_id, from: ['reconciling'], to: 'reconciling', detail: { heldForOperator: 'partly_applied' } });
    return { kind: 'recorded', caseId: dispatch.case_id, attempt, conclusive };
  }
  const established = `recorded by ${o.principal}: ${o.evidence}`.slice(0, 2000);
  if (!(await recordEffectOutcome(uow, dispatch.case_id, { callId: call.id, attempt, source: 'operator', outcome: o.outcome, established, reason: 'operator_recorded', observedAt: o.observedAt }))) {
    return { kind: 'not_unknown', status: 'recorded meanwhile' };
  }
  await moveDispatchTo(uow, { grantId: dispatch.grant_id, from: ['reconciling'], to: 'settling' });
  await notifyAtCommit(uow, DISPATCH_CHANNEL);
  return { kind: 'recorded', caseId: dispatch.case_id, attempt, conclusive };
}
