/**
 * Metrics (DESIGN §7): prefix `everdict_`, base units (seconds), `_total` counters, histograms for
 * latency, and only bounded labels — message types, consumer names, outcome classes, refusal
 * reasons, operation names. Never case, task or message ids.
 *
 * Each process owns one prom-client `Registry` (never the global one, so two services composed in
 * one process, or two tests, never collide). The store and bus libs do not import prom-client or
 * this package: they accept the plain callback interfaces `BusMetrics` / `StoreMetrics` (declared
 * structurally identical there), and the composition root hands them `busMetricsSink(metrics)` /
 * `storeMetricsSink(metrics)`.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export interface BusMetrics {
  published(type: string, n?: number): void;
  confirmed(n?: number): void;
  consumed(consumer: string, outcome: 'applied' | 'duplicate' | 'refused' | 'dead_lettered' | 'failed'): void;
  duplicate(consumer: string): void;
  refused(consumer: string, reason: string): void;
  deadLettered(consumer: string, reason: string): void;
  outboxLag(seconds: number, pending: number): void;
  handlerSeconds(consumer: string, seconds: number): void;
}

export interface StoreMetrics {
  staleFence(operation: string): void;
  /** A unit of work's end; 'duplicate': one on a delivery recorded already, rolled back having written nothing. */
  transaction(outcome: 'commit' | 'rollback' | 'duplicate', seconds: number): void;
}

export const noopBusMetrics: BusMetrics = Object.freeze({
  published: () => {},
  confirmed: () => {},
  consumed: () => {},
  duplicate: () => {},
  refused: () => {},
  deadLettered: () => {},
  outboxLag: () => {},
  handlerSeconds: () => {},
});

export const noopStoreMetrics: StoreMetrics = Object.freeze({
  staleFence: () => {},
  transaction: () => {},
});

/** Latency buckets in seconds: a sub-millisecond commit up to a 10 s handler. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

const NON_CONFORMING_DEFAULTS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

interface CreateMetricsOptions {
  /** Added as the `service` label to every series (a bounded, per-process constant). */
  service: string;
  /** Collect prom-client's default process_* and nodejs_* metrics; default true. */
  defaultMetrics?: boolean;
}

export interface EverdictMetrics {
  readonly registry: Registry;
  readonly bus: {
    readonly published: Counter<'type'>;
    readonly confirmed: Counter;
    readonly consumed: Counter<'consumer' | 'outcome'>;
    readonly duplicates: Counter<'consumer'>;
    readonly refused: Counter<'consumer' | 'reason'>;
    readonly deadLettered: Counter<'consumer' | 'reason'>;
    readonly handlerDuration: Histogram<'consumer'>;
  };
  readonly outbox: {
    readonly lag: Gauge;
    readonly pending: Gauge;
  };
  readonly store: {
    readonly staleFence: Counter<'operation'>;
    readonly transactions: Counter<'outcome'>;
    readonly transactionDuration: Histogram;
  };
  readonly config: {
    /** SIGHUP reloads of the fleet config: `applied`, or `refused` (the running config kept). */
    readonly reloads: Counter<'outcome'>;
  };
}

export function createMetrics(opts: CreateMetricsOptions): EverdictMetrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service: opts.service });
  if (opts.defaultMetrics ?? true) {
    collectDefaultMetrics({ register: registry });
    // prom-client exports these GAUGES with a `_total` suffix, which Prometheus naming reserves
    // for counters (`promtool check metrics` rejects them). The per-type series without the
    // suffix (nodejs_active_handles{type}, …) carry the same information.
    for (const name of NON_CONFORMING_DEFAULTS) registry.removeSingleMetric(name);
  }
  const registers = [registry];
  return {
    registry,
    bus: {
      published: new Counter({ name: 'everdict_bus_published_total', help: 'Messages published to the broker, by message type.', labelNames: ['type'], registers }),
      confirmed: new Counter({ name: 'everdict_bus_confirmed_total', help: 'Publishes confirmed by the broker.', registers }),
      consumed: new Counter({ name: 'everdict_bus_consumed_total', help: 'Deliveries handled by a consumer, by outcome class.', labelNames: ['consumer', 'outcome'], registers }),
      duplicates: new Counter({ name: 'everdict_bus_duplicates_total', help: 'Redeliveries recognised by the inbox (same id, same payload hash).', labelNames: ['consumer'], registers }),
      refused: new Counter({ name: 'everdict_bus_refused_total', help: 'Deliveries refused (e.g. same id with a different payload hash), by reason.', labelNames: ['consumer', 'reason'], registers }),
      deadLettered: new Counter({ name: 'everdict_bus_dead_lettered_total', help: 'Deliveries sent to the dead-letter queue, by reason.', labelNames: ['consumer', 'reason'], registers }),
      handlerDuration: new Histogram({ name: 'everdict_bus_handler_duration_seconds', help: 'Consumer handler duration including its unit of work.', labelNames: ['consumer'], buckets: LATENCY_BUCKETS, registers }),
    },
    outbox: {
      lag: new Gauge({ name: 'everdict_outbox_lag_seconds', help: 'Age of the oldest committed, unpublished outbox row (0 when none).', registers }),
      pending: new Gauge({ name: 'everdict_outbox_pending', help: 'Committed outbox rows not yet confirmed by the broker.', registers }),
    },
    store: {
      staleFence: new Counter({ name: 'everdict_store_stale_fence_total', help: 'Fenced writes refused because the writer held a stale fence epoch.', labelNames: ['operation'], registers }),
      transactions: new Counter({ name: 'everdict_store_transactions_total', help: 'Units of work finished, by outcome.', labelNames: ['outcome'], registers }),
      transactionDuration: new Histogram({ name: 'everdict_store_transaction_duration_seconds', help: 'Unit-of-work duration from BEGIN to COMMIT or ROLLBACK.', buckets: LATENCY_BUCKETS, registers }),
    },
    config: {
      reloads: new Counter({ name: 'everdict_config_reloads_total', help: 'Fleet config reloads (SIGHUP), by outcome: applied or refused.', labelNames: ['outcome'], registers }),
    },
  };
}

/**
 * Label values that reach the sinks come from code (types, reasons, consumer names), but a bug
 * could pass an id. Past this many distinct values per label the value is folded into `other`,
 * so a mistake costs one series, not a cardinality explosion.
 */
export const MAX_LABEL_VALUES = 100;
const OVERFLOW_LABEL = 'other';

function labelGuard(limit = MAX_LABEL_VALUES): (value: string) => string {
  const seen = new Set<string>();
  return (value) => {
    if (seen.has(value)) return value;
    if (seen.size >= limit) return OVERFLOW_LABEL;
    seen.add(value);
    return value;
  };
}

function nonNegative(n: number): number {
  return Number.isFinite(n) && n > 0 ? n : 0;
}

export function busMetricsSink(metrics: EverdictMetrics): BusMetrics {
  const m = metrics.bus;
  const type = labelGuard();
  const consumer = labelGuard();
  const reason = labelGuard();
  return {
    published: (t, n = 1) => m.published.inc({ type: type(t) }, nonNegative(n)),
    confirmed: (n = 1) => m.confirmed.inc(nonNegative(n)),
    consumed: (c, outcome) => m.consumed.inc({ consumer: consumer(c), outcome }),
    duplicate: (c) => m.duplicates.inc({ consumer: consumer(c) }),
    refused: (c, r) => m.refused.inc({ consumer: consumer(c), reason: reason(r) }),
    deadLettered: (c, r) => m.deadLettered.inc({ consumer: consumer(c), reason: reason(r) }),
    outboxLag: (seconds, pending) => {
      metrics.outbox.lag.set(nonNegative(seconds));
      metrics.outbox.pending.set(nonNegative(pending));
    },
    handlerSeconds: (c, seconds) => m.handlerDuration.observe({ consumer: consumer(c) }, nonNegative(seconds)),
  };
}

export function storeMetricsSink(metrics: EverdictMetrics): StoreMetrics {
  const m = metrics.store;
  const operation = labelGuard();
  return {
    staleFence: (op) => m.staleFence.inc({ operation: operation(op) }),
    transaction: (outcome, seconds) => {
      m.transactions.inc({ outcome });
      m.transactionDuration.observe(nonNegative(seconds));
    },
  };
}
