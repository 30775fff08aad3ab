/**
 * The case lifecycle (seed 004 §11.1): `refreshCaseState` re-derives a case's state from its
 * committed records (sql/caseState.ts, the one implementation) inside the caller's unit of
 * work, and appends a `case_state` ledger record — from, to, the cause and, when the case
 * cannot be resolved yet, why — in that same unit of work when the state changed. Every
 * transition that changes a record the state is derived from calls it: task claim, park,
 * finish and wake, gate open and decision, dispatch moves, the case stop.
 */
import type { CaseState } from '@everdict/contracts';
import { lockCaseForState, lockCasesForState, refreshCaseState as refreshStatement } from './sql/caseState.js';
import type { CaseStateChange, LockedCaseState } from './sql/caseState.js';
import type { LedgerHead } from './ledgerHash.js';
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
  /** The case's ledger head once refreshed: the record appended, else the head read under the lock. */
  readonly head: LedgerHead;
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
  const derived = await derive(uow, caseId, cause, locked);
  if (derived === undefined || derived.record === null) return derived?.refresh;
  const appended = await uow.appendLedger(caseId, derived.record, { lockedHead: derived.refresh.head });
  return { ...derived.refresh, appended, head: { seq: appended.seq, hash: appended.hash } };
}

/**
 * refreshCaseState for several DISTINCT cases of one unit of work (a group commit's finishes):
 * every case lock in one statement (case-id order), each derivation on its own, every
 * `case_state` record in one statement. Same result per case as refreshCaseState one by one.
 * `held`: the heads and case rows this unit of work already locked, in that order, and what it
 * read under those locks (writeJournals' `lockCases`); the lock statement is then not sent.
 */
export async function refreshCaseStates(
  uow: UnitOfWork,
  parts: readonly { caseId: string; cause: CaseStateCause }[],
  held?: ReadonlyMap<string, LockedCaseState>,
): Promise<Map<string, CaseStateRefresh>> {
  const out = new Map<string, CaseStateRefresh>();
  if (parts.length === 0) return out;
  const locked = held ?? new Map((await uow.query<LockedCaseState & { case_id: string }>(lockCasesForState(parts.map((p) => p.caseId)))).rows.map((r) => [r.case_id, r]));
  const records: { caseId: string; rec: { kind: string; body: unknown }; lockedHead: LedgerHead }[] = [];
  const pending = new Map<string, CaseStateRefresh>();
  for (const p of [...parts].sort((a, b) => (a.caseId < b.caseId ? -1 : a.caseId > b.caseId ? 1 : 0))) {
    const l = locked.get(p.caseId);
    if (!l) continue;
    const derived = await derive(uow, p.caseId, p.cause, l);
    if (derived === undefined) continue;
    if (derived.record === null) out.set(p.caseId, derived.refresh);
    else {
      pending.set(p.caseId, derived.refresh);
      records.push({ caseId: p.caseId, rec: derived.record, lockedHead: derived.refresh.head });
    }
  }
  const appended = await uow.appendLedgerLocked(records);
  records.forEach((r, i) => out.set(r.caseId, { ...pending.get(r.caseId)!, appended: appended[i]!, head: { seq: appended[i]!.seq, hash: appended[i]!.hash } }));
  return out;
}

/**
 * The derivation under a case lock already held: the refresh, and the `case_state` record to
 * append when the state changed (null when it did not). The head stays the one read under the
 * lock: the derivation appends nothing.
 */
async function derive(uow: UnitOfWork, caseId: string, cause: CaseStateCause, locked: LockedCaseState): Promise<{ refresh: CaseStateRefresh; record: { kind: string; body: unknown } | null } | undefined> {
  const head = { seq: locked.head_seq, hash: locked.head_hash };
  if (unchangedBy(cause.cause, locked.state)) {
    const state = locked.state as CaseState;
    return { refresh: { from: state, to: state, reason: locked.state_reason, appended: null, head }, record: null };
  }
  const r = (await uow.query<CaseStateChange>(refreshStatement(caseId))).rows[0];
  if (!r) return undefined;
  const from = r.from_state as CaseState;
  const to = r.to_state as CaseState;
  const refresh = { from, to, reason: r.to_reason, appended: null, head };
  if (!r.changed) return { refresh, record: null };
  return {
    refresh,
    record: {
      kind: 'case_state',
      // `why` only for a finished root that cannot be resolved yet: what keeps it from resolving.
      body: { from, to, fromReason: r.from_reason, reason: r.to_reason, ...(r.to_reason === 'unreconciled' ? { why: r.why } : {}), ...cause },
    },
  };
}

/** The case's ledger head as a unit of work leaves it, known once its COMMIT-time refresh ran. */
export interface HeadAtCommit {
  /** Set just before COMMIT (null until then, or when the case was not found). */
  head: LedgerHead | null;
}

/**
 * refreshCaseState at COMMIT: the refresh of every case queued in this unit of work runs as one
 * batch (refreshCaseStates) just before COMMIT, after everything the callback wrote — for a
 * caller that does not read the state (a claim in a consumer's batch). A case queued twice is
 * refreshed once, with its first cause: the derivation reads the unit of work's final records
 * either way. The returned holder receives the case's head after the refresh (read once the
 * unit of work committed; a later append by anyone else only makes it stale, which a
 * compare-and-set on the head detects).
 */
export function refreshCaseStateAtCommit(uow: UnitOfWork, caseId: string, cause: CaseStateCause): HeadAtCommit {
  const at: HeadAtCommit = { head: null };
  uow.collectForCommit('case_state', { caseId, cause, at }, async (parts) => {
    const first = new Map<string, CaseStateCause>();
    for (const p of parts) if (!first.has(p.caseId)) first.set(p.caseId, p.cause);
    const states = await refreshCaseStates(uow, [...first].map(([id, c]) => ({ caseId: id, cause: c })));
    for (const p of parts) p.at.head = states.get(p.caseId)?.head ?? null;
  });
  return at;
}
