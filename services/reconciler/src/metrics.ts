/**
 * The reconciler's metrics (infra/metrics-catalog.json). Bounded labels only: park reasons are a
 * closed set. Gauges are set from the database on every tick, so N reconcilers report the same
 * fleet-wide value rather than partial counts.
 */
import { PARK_REASONS } from '@everdict/contracts';
import { Counter, Gauge } from 'prom-client';
import type { Registry } from 'prom-client';

export interface ReconcilerMetrics {
  unknownOutcomes(n: number): void;
  leaseExpiries(n: number): void;
  parkedOldest(ages: readonly { park_reason: string; age_seconds: number }[]): void;
}

export function reconcilerMetrics(registry: Registry): ReconcilerMetrics {
  const registers = [registry];
  const unknown = new Gauge({ name: 'everdict_effect_unknown_outcomes', help: 'Effect calls whose outcome is still unknown (WhatLanded unresolved), awaiting reconciliation.', registers });
  const expiries = new Counter({ name: 'everdict_task_lease_expiries_total', help: 'Task leases found expired by the reconciler and released for another claim.', registers });
  const oldest = new Gauge({ name: 'everdict_tasks_parked_oldest_age_seconds', help: 'Age of the oldest parked task, by park reason (0 when none are parked).', labelNames: ['park_reason'], registers });
  for (const reason of PARK_REASONS) oldest.set({ park_reason: reason }, 0);
  return {
    unknownOutcomes: (n) => unknown.set(n),
    leaseExpiries: (n) => {
      if (n > 0) expiries.inc(n);
    },
    parkedOldest: (ages) => {
      for (const reason of PARK_REASONS) oldest.set({ park_reason: reason }, ages.find((a) => a.park_reason === reason)?.age_seconds ?? 0);
    },
  };
}
