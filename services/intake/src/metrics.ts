/**
 * Intake's metrics. Labels are bounded: `source` is one of ARRIVAL_SOURCES (api, webhook,
 * mailbox, schedule), never a case, customer or delivery id.
 */
import { Counter } from 'prom-client';
import type { EverdictMetrics } from '@everdict/service-kit';

export interface IntakeMetrics {
  opened(source: string, created: boolean): void;
  refused(source: string, status: number): void;
}

const SOURCES = new Set(['api', 'webhook', 'mailbox', 'schedule']);
const bounded = (source: string): string => (SOURCES.has(source) ? source : 'other');

export function intakeMetrics(metrics: EverdictMetrics): IntakeMetrics {
  const registers = [metrics.registry];
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
