/**
 * The per-case caps a turn-worker's claims respect (seed 004 §11.5), read from the fleet config
 * loaded now, so a reload changes the next claim or call. `caps.workerSlots` is enforced at the
 * claim, `caps.externalCallsPerMinute` where a connector read starts, `caps.modelCalls` around
 * each model call and `caps.estateSessions` around each connector read, per estate target
 * (libs/store caps.ts: one mechanism for the concurrent two); the schema declares nothing that
 * is not enforced. A use refused by a concurrent cap queues in place and starts when a place
 * frees up; the task keeps its lease meanwhile and is never failed by the wait.
 */
import type { CapacityWait, FleetConfig } from '@everdict/contracts';
import { admitExternalCall } from '@everdict/store';
import { withHold } from '@everdict/store';
import type { ClaimCaps, Db, HoldCap } from '@everdict/store';
import type { ModelClient } from '@everdict/llm';
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

/** Runs one use under a concurrent cap: `use` starts once the case has a place for it. */
export type HoldGate = <T>(use: { readonly taskId: string; readonly holder: string; readonly target: string; readonly signal?: AbortSignal }, run: () => Promise<T>) => Promise<T>;

/** How often a queued use asks again, in ms. */
export const HOLD_RETRY_MS = 100;

/** The gate of `cap` for `config`, or undefined when no case type declares it (no lookup at all). */
export function holdGate(db: Db | undefined, config: Pick<FleetConfig, 'caseTypes'>, cap: HoldCap): HoldGate | undefined {
  const caseTypes = config.caseTypes ?? {};
  if (db === undefined || !Object.values(caseTypes).some((ct) => ct?.caps?.[cap] !== undefined)) return undefined;
  const limitOf = (caseType: string) => (Object.hasOwn(caseTypes, caseType) ? (caseTypes[caseType]?.caps?.[cap] ?? null) : null);
  return (use, run) =>
    withHold(db, { cap, target: use.target, taskId: use.taskId, holder: use.holder }, limitOf, { retryMs: HOLD_RETRY_MS, ...(use.signal ? { signal: use.signal } : {}) }, run);
}

/** `model` with its calls admitted under the case type's caps.modelCalls (itself when uncapped). */
export function capModelCalls(model: ModelClient, gate: HoldGate | undefined, use: { readonly taskId: string; readonly turn: number }): ModelClient {
  if (gate === undefined) return model;
  return {
    route: model.route,
    complete: (req, opts) =>
      gate({ taskId: use.taskId, holder: `model:${use.taskId}:${use.turn}`, target: '', ...(opts?.signal ? { signal: opts.signal } : {}) }, () => model.complete(req, opts)),
  };
}

/** The estate target a session of `connector` opens on, as estateSessions counts it. */
export function estateTarget(target: { readonly system: string; readonly environment: string; readonly account?: string }): string {
  return [target.system, target.environment, ...(target.account === undefined ? [] : [target.account])].join('/');
}
