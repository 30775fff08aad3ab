/**
 * The case stop (§7), written through the store: an operator's cancel sets the case's stop
 * mode and a resume lifts a soft one, each under the case row's lock, so stops and resumes of
 * one case serialise. A stop never weakens (`stopAfter`): hard is final. The task-side effect —
 * `task.cancel` / `task.resume` to the root task — is the caller's message in the same unit of
 * work.
 */
import { stopAfter } from '@everdict/contracts';
import type { CancelMode } from '@everdict/contracts';
import { refreshCaseState } from './caseState.js';
import type { Queryable } from './db.js';
import { lockCaseForState } from './sql/caseState.js';
import { liftSoftCaseStop, lockCaseStop, selectCaseTask, selectRootTask, setCaseStop } from './sql/cases.js';
import type { UnitOfWork } from './unitOfWork.js';

/** The case's root task (null: it has none yet). */
export async function rootTaskOf(q: Queryable, caseId: string): Promise<string | null> {
  return (await q.query<{ id: string }>(selectRootTask(caseId))).rows[0]?.id ?? null;
}

/** `taskId` if that task belongs to the case, else null. */
export async function taskOfCase(q: Queryable, caseId: string, taskId: string): Promise<string | null> {
  return (await q.query<{ id: string }>(selectCaseTask(caseId, taskId))).rows[0]?.id ?? null;
}

/** Stops the case (`requested` on top of whatever stop it has); returns the stop now in force. */
export async function stopCase(uow: UnitOfWork, caseId: string, requested: CancelMode): Promise<{ stopMode: CancelMode; previous: CancelMode | null }> {
  // The ledger head before the case row: the lock order of every case-row writer (caseState.ts).
  await uow.query(lockCaseForState(caseId));
  const previous = (await uow.query<{ stop_mode: CancelMode | null }>(lockCaseStop(caseId))).rows[0]?.stop_mode ?? null;
  const stopMode = stopAfter(previous, requested);
  await uow.query(setCaseStop(caseId, stopMode));
  if (stopMode === 'hard') await refreshCaseState(uow, caseId, { cause: 'case_hard_cancel' });
  return { stopMode, previous };
}

/**
 * Lifts the case's soft stop; `previous` is the stop it had. A hard stop is final: `refused`,
 * and nothing changes. A case without a stop has nothing to lift, which is not a refusal.
 */
export async function liftSoftStop(uow: UnitOfWork, caseId: string): Promise<{ refused: boolean; previous: CancelMode | null }> {
  await uow.query(lockCaseForState(caseId));
  const previous = (await uow.query<{ stop_mode: CancelMode | null }>(lockCaseStop(caseId))).rows[0]?.stop_mode ?? null;
  if (previous === 'hard') return { refused: true, previous };
  if (previous === 'soft') await uow.query(liftSoftCaseStop(caseId));
  return { refused: false, previous };
}
