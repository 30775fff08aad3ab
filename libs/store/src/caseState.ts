/**
 * The case lifecycle (seed 004 §11.1): `refreshCaseState` re-derives a case's state from its
 * committed records (sql/caseState.ts, the one implementation) inside the caller's unit of
 * work, and appends a `case_state` ledger record — from, to, the cause and, when the case
 * cannot be resolved yet, why — in that same unit of work when the state changed. Every
 * transition that changes a record the state is derived from calls it: task claim, park,
 * finish and wake, gate open and decision, dispatch moves, the case stop.
 */
import type { CaseState } from '@everdict/contracts';
import { REFRESH_SET_MIN, lockCaseForState, lockCasesForState, refreshCaseState as refreshOne, refreshCaseStates as refreshSet } from './sql/caseState.js';
import type { CaseStateChange, CaseStateOutcome, LockedCaseState } from './sql/caseState.js';
import type { QueryResult, Sql } from './db.js';
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
  const derived = (await derive(uow, [{ caseId, cause, locked }])).get(caseId);
  if (derived === undefined || derived.record === null) return derived?.refresh;
  const appended = await uow.appendLedger(caseId, derived.record, { lockedHead: derived.refresh.head });
  return { ...derived.refresh, appended, head: { seq: appended.seq, hash: appended.hash } };
}

/**
 * refreshCaseState for several DISTINCT cases of one unit of work (a group commit's finishes, a
 * batch's claims): every case lock in one statement (case-id order) and the derivations after it
 * in the same round trip, every `case_state` record in one statement. Same result per case as
 * refreshCaseState one by one.
 * `held`: the heads and case rows this unit of work already locked, in that order, and what it
 * read under those locks (writeJournals' `lockCases`); the lock statement is then not sent.
 * `derivedBefore`: derivationStatements' rows, run by this unit of work after its last write to
 * those cases' records (sent in one round trip with that write); they are then not run again.
 * `commit`: the refresh is the unit of work's last work; its records go with the COMMIT
 * (appendLedgerLocked's `commit`). With no record to append, the unit of work commits as usual.
 */
export async function refreshCaseStates(
  uow: UnitOfWork,
  parts: readonly { caseId: string; cause: CaseStateCause }[],
  held?: ReadonlyMap<string, LockedCaseState>,
  derivedBefore?: ReadonlyMap<string, CaseStateChange>,
  opts: { commit?: boolean } = {},
): Promise<Map<string, CaseStateRefresh>> {
  const out = new Map<string, CaseStateRefresh>();
  if (parts.length === 0) return out;
  let locked = held;
  if (locked === undefined) {
    // The derivations go in the lock's round trip: they run after it, under its locks. A case
    // the cause leaves where it is (unchangedBy) is derived too, and its row then used (derive).
    const ids = parts.map((p) => p.caseId);
    const [lockRows, ...derivations] = await uow.queryMany([lockCasesForState(ids), ...(derivedBefore === undefined ? derivationStatements([...new Set(ids)].sort()) : [])]);
    locked = new Map((lockRows!.rows as (LockedCaseState & { case_id: string })[]).map((r) => [r.case_id, r]));
    derivedBefore ??= derivedRows(derivations);
  }
  const records: { caseId: string; rec: { kind: string; body: unknown }; lockedHead: LedgerHead }[] = [];
  const pending = new Map<string, CaseStateRefresh>();
  const sorted = [...parts].sort((a, b) => (a.caseId < b.caseId ? -1 : a.caseId > b.caseId ? 1 : 0));
  const all = await derive(
    uow,
    sorted.flatMap((p) => {
      const l = locked.get(p.caseId);
      return l ? [{ caseId: p.caseId, cause: p.cause, locked: l }] : [];
    }),
    derivedBefore,
  );
  for (const p of sorted) {
    const derived = all.get(p.caseId);
    if (derived === undefined) continue;
    if (derived.record === null) out.set(p.caseId, derived.refresh);
    else {
      pending.set(p.caseId, derived.refresh);
      records.push({ caseId: p.caseId, rec: derived.record, lockedHead: derived.refresh.head });
    }
  }
  const appended = await uow.appendLedgerLocked(records, opts);
  records.forEach((r, i) => out.set(r.caseId, { ...pending.get(r.caseId)!, appended: appended[i]!, head: { seq: appended[i]!.seq, hash: appended[i]!.hash } }));
  return out;
}

export interface Derived {
  readonly refresh: CaseStateRefresh;
  /** The `case_state` record to append; null when the state did not change. */
  readonly record: { kind: string; body: unknown } | null;
}

/**
 * The statements that derive (and write) the states of DISTINCT cases, all sent in one round
 * trip: one for all of them when they are many (REFRESH_SET_MIN), else one each.
 */
export function derivationStatements(caseIds: readonly string[]): Sql[] {
  return caseIds.length >= REFRESH_SET_MIN ? [refreshSet(caseIds)] : caseIds.map((id) => refreshOne(id));
}

/** The derived rows of derivationStatements' results, by case. */
export function derivedRows(results: readonly QueryResult<unknown>[]): Map<string, CaseStateChange> {
  const rows = new Map<string, CaseStateChange>();
  for (const res of results) for (const r of res.rows as CaseStateChange[]) rows.set(r.case_id, r);
  return rows;
}

/**
 * The derivation of DISTINCT cases under case locks already held, by case (an unknown case has
 * none): a case the cause provably leaves where it is (unchangedBy) is not read again; the others
 * are derived by derivationStatements, unless `derivedBefore` holds their rows already. The heads
 * stay the ones read under the locks: the derivation appends nothing.
 */
async function derive(
  uow: UnitOfWork,
  parts: readonly { caseId: string; cause: CaseStateCause; locked: LockedCaseState }[],
  derivedBefore: ReadonlyMap<string, CaseStateChange> = new Map(),
): Promise<Map<string, Derived>> {
  const out = new Map<string, Derived>();
  const headOf = (l: LockedCaseState): LedgerHead => ({ seq: l.head_seq, hash: l.head_hash });
  const asked = parts.filter((p) => {
    if (!unchangedBy(p.cause.cause, p.locked.state) || derivedBefore.has(p.caseId)) return true;
    const state = p.locked.state as CaseState;
    out.set(p.caseId, { refresh: { from: state, to: state, reason: p.locked.state_reason, appended: null, head: headOf(p.locked) }, record: null });
    return false;
  });
  if (asked.length === 0) return out;
  const rows = new Map(derivedBefore);
  const missing = asked.filter((p) => !rows.has(p.caseId)).map((p) => p.caseId);
  if (missing.length > 0) for (const [id, r] of derivedRows(await uow.queryMany(derivationStatements(missing)))) rows.set(id, r);
  for (const p of asked) {
    const r = rows.get(p.caseId);
    if (r) out.set(p.caseId, changeOf(r, p.cause, headOf(p.locked)));
  }
  return out;
}

/** A derived row as a refresh, with the `case_state` record when the state changed (pure). */
export function changeOf(r: CaseStateOutcome, cause: CaseStateCause, head: LedgerHead): Derived {
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
  /** Set by the COMMIT-time refresh (null until then, or when the case was not found). */
  head: LedgerHead | null;
}

/**
 * refreshCaseState at COMMIT: the refresh of every case queued in this unit of work runs as one
 * batch (refreshCaseStates) just before COMMIT, after everything the callback and the other
 * COMMIT-time flushes wrote (the first intents of claims), and its `case_state` records go with
 * the COMMIT — for a caller that does not read the state (a claim in a consumer's batch). A case
 * queued twice is refreshed once, with its first cause: the derivation reads the unit of work's
 * final records either way. The returned holder receives the case's head after the refresh (read once the
 * unit of work committed; a later append by anyone else only makes it stale, which a
 * compare-and-set on the head detects).
 */
export function refreshCaseStateAtCommit(uow: UnitOfWork, caseId: string, cause: CaseStateCause): HeadAtCommit {
  const at: HeadAtCommit = { head: null };
  uow.collectForCommit(
    'case_state',
    { caseId, cause, at },
    async (parts) => {
      const first = new Map<string, CaseStateCause>();
      for (const p of parts) if (!first.has(p.caseId)) first.set(p.caseId, p.cause);
      const states = await refreshCaseStates(
        uow,
        [...first].map(([id, c]) => ({ caseId: id, cause: c })),
        undefined,
        undefined,
        { commit: true },
      );
      for (const p of parts) p.at.head = states.get(p.caseId)?.head ?? null;
    },
    { last: true },
  );
  return at;
}
