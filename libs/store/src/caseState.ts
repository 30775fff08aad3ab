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
import type { CaseStateChange, LockedCaseState } from './sql/caseState.js';
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
 * Whether `cause` provably leaves a case in `state` where it is (pure; the state is read under
 * the case lock, so no other refresh runs between that read and this unit of work's commit).
 * A claim or a wake only makes one task active (running, or open again after it ran): of
 * the derivation's inputs it can only set `active` and `ever_ran` and move the root from open
 * or parked to running or open. A case derived `running` already has a root that is neither
 * finished nor cancelled, has run, has no open gate and no held work, and is active or has an
 * open root; one more active task keeps every one of those, so it stays `running` with no
 * reason. Any other state (opened, parked on its tasks, at a gate, …) is derived again.
 */
export function unchangedBy(cause: string, state: string): boolean {
  return state === 'running' && (cause === 'task_claimed' || cause.startsWith('task_woken:'));
}

/**
 * Re-derives the case's state after `cause` changed its records. Locks the ledger head, then
 * the case row (the order every writer of a case row keeps), so refreshes of one case
 * serialise and each sees the records the previous one committed. Undefined for an unknown case.
 */
export async function refreshCaseState(uow: UnitOfWork, caseId: string, cause: CaseStateCause): Promise<CaseStateRefresh | undefined> {
  const locked = (await uow.query<LockedCaseState>(lockCaseForState(caseId))).rows[0];
  if (!locked) return undefined;
  if (unchangedBy(cause.cause, locked.state)) {
    const state = locked.state as CaseState;
    return { from: state, to: state, reason: locked.state_reason, appended: null };
  }
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
