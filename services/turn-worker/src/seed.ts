/**
 * Opening a case with its root task, as intake does (DESIGN §2): the case (idempotent on its
 * origin key), the root task under the case type's root profile, and its task.runnable — one
 * unit of work. Used by the tests and the benchmark in place of the intake service.
 */
import type { FleetConfig } from '@everdict/contracts';
import { EverdictError } from '@everdict/contracts';
import type { Store } from '@everdict/store';
import { sendRunnable } from './envelopes.js';

interface OpenedCase {
  readonly caseId: string;
  readonly taskId: string | null;
  readonly created: boolean;
}

export async function openCaseWithRootTask(store: Store, config: FleetConfig, c: { caseType: string; originKey: string; customer: string; objective: string; title?: string }): Promise<OpenedCase> {
  const ct = config.caseTypes[c.caseType];
  if (!ct) throw new EverdictError('unknown_case_type', `case type ${c.caseType} is not in the fleet config`, { details: { field: 'caseType' } });
  const profile = config.profiles[ct.rootProfile];
  if (!profile) throw new EverdictError('unknown_profile', `profile ${ct.rootProfile} is not in the fleet config`, { details: { field: `caseTypes.${c.caseType}.rootProfile` } });
  return store.unitOfWork(async (uow) => {
    const opened = await uow.openCase({ caseType: c.caseType, originKey: c.originKey, customer: c.customer, title: c.title ?? '', objective: { text: c.objective } });
    if (!opened.created) return { caseId: opened.caseId, taskId: null, created: false };
    const taskId = await uow.createTask({ caseId: opened.caseId, profile: ct.rootProfile, profileVersion: profile.version, objective: { text: c.objective } });
    await sendRunnable(uow, { id: taskId, case_id: opened.caseId }, 'opened', null);
    return { caseId: opened.caseId, taskId, created: true };
  });
}
