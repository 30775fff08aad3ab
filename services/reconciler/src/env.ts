/**
 * The reconciler's environment variables, validated by `everdict start` together with every
 * other variable of the node; `reconcilerOptionsFromEnv` turns them into `ReconcilerOptions`.
 */
import { envVar, integerParser } from '@everdict/service-kit';
import type { EnvSpec, EnvValues } from '@everdict/service-kit';

export const RECONCILER_ENV = {
  /** EVERDICT_RECONCILE_INTERVAL_MS: sweep period when nothing wakes it sooner (default 1000). */
  intervalMs: envVar('EVERDICT_RECONCILE_INTERVAL_MS', integerParser(20, 3_600_000), { default: 1_000 }),
  /** EVERDICT_RECONCILE_BACKOFF_MS: first WhatLanded recheck delay (default 1000), doubling up to the max. */
  backoffMs: envVar('EVERDICT_RECONCILE_BACKOFF_MS', integerParser(10, 3_600_000), { default: 1_000 }),
  /** EVERDICT_RECONCILE_BACKOFF_MAX_MS: longest recheck delay (default 300 000; never below the first). */
  backoffMaxMs: envVar('EVERDICT_RECONCILE_BACKOFF_MAX_MS', integerParser(10, 24 * 3_600_000), { default: 300_000 }),
  /** EVERDICT_RECONCILE_LEASE_MS: claim lease of an execution being reconciled (default 30 000). */
  leaseMs: envVar('EVERDICT_RECONCILE_LEASE_MS', integerParser(200, 3_600_000), { default: 30_000 }),
} satisfies EnvSpec;

export function reconcilerOptionsFromEnv(v: EnvValues<typeof RECONCILER_ENV>): { intervalMs: number; backoff: { initialMs: number; maxMs: number }; leaseMs: number } {
  return { intervalMs: v.intervalMs, backoff: { initialMs: v.backoffMs, maxMs: Math.max(v.backoffMs, v.backoffMaxMs) }, leaseMs: v.leaseMs };
}
