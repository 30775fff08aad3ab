/**
 * Intake's metrics. Labels are bounded: `source` is one of ARRIVAL_SOURCES (api, webhook,
 * mailbox, schedule), never a case, customer or delivery id.
 */
import { Counter, Gauge } from 'prom-client';
import type { EverdictMetrics } from '@everdict/service-kit';

export interface IntakeMetrics {
  opened(source: string, created: boolean): void;
  refused(source: string, status: number): void;
}

const SOURCES = new Set(['api', 'webhook', 'mailbox', 'schedule']);
const bounded = (source: string): string => (SOURCES.has(source) ? source : 'other');

/** The fleet stops as the gauge reads them at scrape time (fleetStop.ts). */
type FleetStopReader = () => Promise<readonly { kind: string; active: boolean }[]>;

export function intakeMetrics(metrics: EverdictMetrics, opts: { fleetStops?: FleetStopReader } = {}): IntakeMetrics {
  const registers = [metrics.registry];
  const read = opts.fleetStops;
  new Gauge({
    name: 'everdict_fleet_stop',
    help: 'Whether a fleet-wide stop is in force (1) or not (0), by kind: hard (no new dispatch) or soft (no new case; work parks at its checkpoint).',
    labelNames: ['kind'],
    registers,
    async collect() {
      // A scrape during a database outage reports the last values rather than failing.
      const rows = read ? await read().catch(() => undefined) : undefined;
      for (const r of rows ?? []) this.set({ kind: r.kind }, r.active ? 1 : 0);
    },
  });
  const opened = new Counter({ name: 'everdict_intake_cases_opened_total', help: 'Cases opened by intake, by arrival source.', labelNames: ['source'], registers });
  const duplicates = new Counter({ name: 'everdict_intake_duplicate_arrivals_total', help: 'Arrivals whose origin key had already opened a case, by arrival source.', labelNames: ['source'], registers });
  const refused = new Counter({ name: 'everdict_intake_refused_total', help: 'Arrivals refused before opening anything, by arrival source and HTTP status class.', labelNames: ['source', 'status'], registers });
  return {
    opened(source, created) {
      (created ? opened : duplicates).inc({ source: bounded(source) });
    },
    refused(source, status) {
      refused.inc({ source: bounded(source), status: String(status) });
    },
  };
}
