/**
 * The reconciler's metrics (infra/metrics-catalog.json). Bounded labels only: park reasons are a
 * closed set. Gauges are set from the database on every tick, so N reconcilers report the same
 * fleet-wide value rather than partial counts.
 */
import { PARK_REASONS } from '@everdict/contracts';
import { Counter, Gauge } from 'prom-client';
import type { Registry } from 'prom-client';
import { RETENTION_KINDS } from '@everdict/store';
import type { RetentionKind } from '@everdict/store';

/** Gate kinds (the gates.kind CHECK constraint): a closed set, so a bounded label. */
export const GATE_KINDS = ['write', 'consent'] as const;
/**
 * Statistics of the open gates' wait reported by everdict_gate_open_wait_seconds. They describe
 * the gates open right now (a snapshot from the database), not observations over a window, so
 * they are a `stat` label on a gauge rather than a summary's `quantile`.
 */
const WAIT_STATS = [['p50', 'p50'], ['p90', 'p90'], ['p99', 'p99'], ['max', 'oldest']] as const;

export interface ReconcilerMetrics {
  unknownOutcomes(n: number): void;
  leaseExpiries(n: number): void;
  parkedOldest(ages: readonly { park_reason: string; age_seconds: number; parked: number }[]): void;
  openGates(waits: readonly { kind: string; open: number; p50: number; p90: number; p99: number; oldest: number }[]): void;
  retentionPruned(kind: RetentionKind, rows: number): void;
}

export function reconcilerMetrics(registry: Registry): ReconcilerMetrics {
  const registers = [registry];
  const unknown = new Gauge({ name: 'everdict_effect_unknown_outcomes', help: 'Effect calls whose outcome is still unknown (WhatLanded unresolved), awaiting reconciliation.', registers });
  const expiries = new Counter({ name: 'everdict_task_lease_expiries_total', help: 'Task leases found expired by the reconciler and released for another claim.', registers });
  const oldest = new Gauge({ name: 'everdict_tasks_parked_oldest_age_seconds', help: 'Age of the oldest parked task, by park reason (0 when none are parked).', labelNames: ['park_reason'], registers });
  const parked = new Gauge({ name: 'everdict_tasks_parked', help: 'Tasks parked right now, by park reason.', labelNames: ['park_reason'], registers });
  const gatesOpen = new Gauge({ name: 'everdict_gates_open', help: 'Gates waiting for their decisions right now, by gate kind (write, consent).', labelNames: ['kind'], registers });
  const gateWait = new Gauge({ name: 'everdict_gate_open_wait_seconds', help: 'How long the gates open right now have waited so far, by gate kind and stat: p50, p90, p99 over the open gates, max = the oldest (0 when none is open).', labelNames: ['kind', 'stat'], registers });
  const pruned = new Counter({ name: 'everdict_retention_pruned_total', help: 'Rows deleted by retention passes, by kind (inbox, outbox, papers).', labelNames: ['kind'], registers });
  for (const kind of RETENTION_KINDS) pruned.inc({ kind }, 0);
  for (const reason of PARK_REASONS) {
    oldest.set({ park_reason: reason }, 0);
    parked.set({ park_reason: reason }, 0);
  }
  for (const kind of GATE_KINDS) {
    gatesOpen.set({ kind }, 0);
    for (const [stat] of WAIT_STATS) gateWait.set({ kind, stat }, 0);
  }
  return {
    unknownOutcomes: (n) => unknown.set(n),
    leaseExpiries: (n) => {
      if (n > 0) expiries.inc(n);
    },
    parkedOldest: (ages) => {
      for (const reason of PARK_REASONS) {
        const row = ages.find((a) => a.park_reason === reason);
        oldest.set({ park_reason: reason }, row?.age_seconds ?? 0);
        parked.set({ park_reason: reason }, row?.parked ?? 0);
      }
    },
    retentionPruned: (kind, rows) => pruned.inc({ kind }, rows),
    openGates: (waits) => {
      for (const kind of GATE_KINDS) {
        const row = waits.find((w) => w.kind === kind);
        gatesOpen.set({ kind }, row?.open ?? 0);
        for (const [stat, field] of WAIT_STATS) gateWait.set({ kind, stat }, row?.[field] ?? 0);
      }
    },
  };
}
