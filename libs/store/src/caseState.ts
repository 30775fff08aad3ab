/**
 * The case lifecycle (seed 004 §11.1): `refreshCaseState` re-derives a case's state from its
 * committed records (sql/caseState.ts, the one implementation) inside the caller's unit of
 * work, and appends a `case_state` ledger record — from, to, the cause and, when the case
 * cannot be resolved yet, why — in that same unit of work when the state changed. Every
 * transition that changes a record the state is derived from calls it: task claim, park,
 * finish and wake, gate open and decision, dispatch moves, the case stop.
 */
import type { CaseState } from '@everdict/contracts';
import { lockCaseForState, refreshCaseState as refreshStatement } from './sql/caseState.js';
import type { CaseStateChange } from './sql/caseState.js';
import type { LedgerAppended, UnitOfWork } from './unitOfWork.js';

/** What changed a case's records: a kind (`task_claimed`, `gate_opened`, …) and the ids involved. */
export interface CaseStateCause {
  readonly cause: string;
  readonly taskId?: string;
  readonly gateId?: string;
  readonly grantId?: string;
}

export interface CaseStateRefresh {
  readonly from: CaseState;
  readonly to: CaseState;
  readonly reason: string | null;
  /** The ledger record of the change; null when the state did not change. */
  readonly appended: LedgerAppended | null;
}

/**
 * Re-derives the case's state after `cause` changed its records. Locks the ledger head, then
 * the case row (the order every writer of a case row keeps), so refreshes of one case
 * serialise and each sees the records the previous one committed. Undefined for an unknown case.
 */
export async function refreshCaseState(uow: UnitOfWork, caseId: string, cause: CaseStateCause): Promise<CaseStateRefresh | undefined> {
  if ((await uow.query(lockCaseForState(caseId))).rowCount === 0) return undefined;
  const r = (await uow.query<CaseStateChange>(refreshStatement(caseId))).rows[0];
  if (!r) return undefined;
  const from = r.from_state as CaseState;
  const to = r.to_state as CaseState;
  if (!r.changed) return { from, to, reason: r.to_reason, appended: null };
  const appended = await uow.appendLedger(caseId, {
    kind: 'case_state',
    // `why` only for a finished root that cannot be resolved yet: what keeps it from resolving.
    body: { from, to, fromReason: r.from_reason, reason: r.to_reason, ...(r.to_reason === 'unreconciled' ? { why: r.why } : {}), ...cause },
  });
  return { from, to, reason: r.to_reason, appended };
}
