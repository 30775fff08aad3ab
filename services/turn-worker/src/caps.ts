/**
 * The per-case caps a turn-worker's claims respect (seed 004 §11.5), read from the fleet config
 * loaded now, so a reload changes the next claim or call. `caps.workerSlots` is enforced at the
 * claim, `caps.externalCallsPerMinute` where a connector read starts (libs/store caps.ts); the
 * schema declares nothing that is not enforced.
 */
import type { CapacityWait, FleetConfig } from '@everdict/contracts';
import { admitExternalCall } from '@everdict/store';
import type { ClaimCaps, Db } from '@everdict/store';
import type { Catalog } from './catalog.js';

export function claimCaps(catalog: Pick<Catalog, 'loaded' | 'settings'>): ClaimCaps {
  const caseTypes = catalog.loaded.config.caseTypes;
  const any = Object.values(caseTypes).some((ct) => ct?.caps?.workerSlots !== undefined);
  return {
    any,
    workerSlots: (caseType) => (Object.hasOwn(caseTypes, caseType) ? (caseTypes[caseType]?.caps?.workerSlots ?? null) : null),
    // A waiting claim is retried on the next sweep after its timer: the sweep is what wakes it.
    retryMs: catalog.settings.sweepIntervalMs,
  };
}

/** Admits one external call of a task (null: it may start) — `caps.externalCallsPerMinute`. */
export type ExternalCallGate = (taskId: string, callId: string) => Promise<CapacityWait | null>;

/** The gate for `config`, or undefined when no case type caps its external calls (no lookup at all). */
export function externalCallGate(db: Db | undefined, config: Pick<FleetConfig, 'caseTypes'>): ExternalCallGate | undefined {
  const caseTypes = config.caseTypes ?? {};
  if (db === undefined || !Object.values(caseTypes).some((ct) => ct?.caps?.externalCallsPerMinute !== undefined)) return undefined;
  const limitOf = (caseType: string) => (Object.hasOwn(caseTypes, caseType) ? (caseTypes[caseType]?.caps?.externalCallsPerMinute ?? null) : null);
  return (taskId, callId) => admitExternalCall(db, taskId, callId, limitOf);
}
