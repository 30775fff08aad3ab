/**
 * Opening a case (platform.intake, §11.6): the CASE (idempotent on its origin key), the ROOT
 * TASK under the case type's root profile with its budget, the `task.runnable` outbox row and
 * the `case_opened` ledger record — ONE unit of work, so either all exist or none does. A
 * duplicate arrival (same origin key, at once or later) answers the existing case and writes
 * nothing: the unique origin key serialises concurrent arrivals inside Postgres.
 */
import { EverdictError } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import type { ArrivalSink, NormalisedArrival, OpenedCase } from '@everdict/intake-sources';
import { storableText } from '@everdict/http-api';
import { admitNewCase, enqueuePlatformMessage } from '@everdict/store';
import type { Store } from '@everdict/store';
import { SPAN, withSpan } from '@everdict/tracing';
import { recordOpeningArrival, threadArrival } from './threading.js';

export const INTAKE_SERVICE = 'intake';

interface CaseOpening {
  readonly arrival: NormalisedArrival;
  readonly caseType: string;
  readonly customer: string;
  /** Principal that sent it, when a person or system authenticated (kept in the ledger). */
  readonly principal?: string | null;
}

interface OpenedWithTask extends OpenedCase {
  readonly rootTaskId: string | null;
}

class UnknownCaseType extends EverdictError {
  constructor(caseType: string, field: string) {
    super('unknown_case_type', `case type ${caseType} is not in the fleet config`, { details: { field } });
  }
}

/** The case type's root profile and budget, or a typed error naming the field. */
function rootTaskPlan(fleet: FleetConfig, caseType: string, field = 'caseType'): { profile: string; profileVersion: string | undefined; budgetLimitMinutes: number | null; scope: unknown; initialGrants: string[] } {
  const ct = fleet.caseTypes[caseType];
  if (!ct) throw new UnknownCaseType(caseType, field);
  const profile = fleet.profiles[ct.rootProfile];
  if (!profile) throw new EverdictError('unknown_profile', `profile ${ct.rootProfile} is not in the fleet config`, { details: { field: `caseTypes.${caseType}.rootProfile` } });
  const minutes = ct.budget?.maxActiveMinutes ?? profile.budget?.maxActiveMinutes;
  return { profile: ct.rootProfile, profileVersion: profile.version, budgetLimitMinutes: minutes ?? null, scope: ct.scope, initialGrants: [...(ct.initialGrants ?? [])] };
}

export async function openCase(store: Store, fleet: FleetConfig, o: CaseOpening): Promise<OpenedWithTask> {
  const plan = rootTaskPlan(fleet, o.caseType);
  // Text from sources that cannot be refused (mail, webhooks) is made storable, never a 500:
  // NULs and lone surrogates become U+FFFD (the case API refuses them with 400 before this).
  const a = { ...o.arrival, title: storableText(o.arrival.title), body: storableText(o.arrival.body) };
  const objective = { text: a.body.length > 0 ? `${a.title}\n\n${a.body}` : a.title };
  // The case's trace starts here (ids and the source's configured name only, never its text).
  return withSpan(SPAN.arrival, { attributes: { source: a.source } }, async (span) => {
    const opened = await openInUnit(store, o, plan, a, objective);
    span.set({ 'case.id': opened.caseId, 'task.id': opened.rootTaskId, outcome: opened.created ? 'opened' : 'duplicate' });
    return opened;
  });
}

async function openInUnit(store: Store, o: CaseOpening, plan: ReturnType<typeof rootTaskPlan>, a: NormalisedArrival, objective: { text: string }): Promise<OpenedWithTask> {
  return store.unitOfWork(async (uow) => {
    // Every source opens through here: a fleet soft stop refuses them all alike.
    await admitNewCase(uow);
    const opened = await uow.openCase({ caseType: o.caseType, originKey: a.originKey, customer: o.customer, title: a.title, objective, scope: plan.scope });
    if (!opened.created) return { caseId: opened.caseId, created: false, rootTaskId: null };
    const taskId = await uow.createTask({
      caseId: opened.caseId,
      profile: plan.profile,
      ...(plan.profileVersion !== undefined ? { profileVersion: plan.profileVersion } : {}),
      objective,
      budgetLimitMinutes: plan.budgetLimitMinutes,
    });
    await enqueuePlatformMessage(uow, INTAKE_SERVICE, 'task.runnable', opened.caseId, { taskId, reason: 'opened' });
    // Bodies and addresses stay out of the ledger body: it names the source and the reference.
    await uow.appendLedger(opened.caseId, {
      kind: 'case_opened',
      body: { caseType: o.caseType, source: a.source, originKey: a.originKey, rootTaskId: taskId, principal: o.principal ?? null, receivedAt: a.receivedAt, attachments: a.attachments.length, initialGrants: plan.initialGrants },
    });
    // The opening arrival is the case's first input; its Message-ID starts the case's mail thread.
    await recordOpeningArrival(uow, opened.caseId, o.arrival);
    return { caseId: opened.caseId, created: true, rootTaskId: taskId };
  });
}

/**
 * An ArrivalSink for one source (a webhook source or a mailbox) bound to its case type and
 * default customer. An arrival naming no customer, with no default, is refused naming the field.
 */
export function caseSink(deps: { store: Store; fleet: () => FleetConfig; caseType: string; customer?: string; onOpened?: (source: string, created: boolean) => void }): ArrivalSink {
  return {
    async open(arrival) {
      const customer = arrival.customer ?? deps.customer;
      if (!customer) throw new EverdictError('invalid_arrival', `arrival from ${arrival.source} names no customer and the source has no default`, { details: { field: 'customer' } });
      // A reply or a comment on an existing case is a new input to it, not a new case (threading.ts).
      const threaded = await threadArrival(deps.store, arrival, customer, INTAKE_SERVICE);
      if (threaded) {
        deps.onOpened?.(arrival.source, false);
        return threaded;
      }
      const r = await openCase(deps.store, deps.fleet(), { arrival, caseType: deps.caseType, customer });
      deps.onOpened?.(arrival.source, r.created);
      return { caseId: r.caseId, created: r.created };
    },
  };
}
