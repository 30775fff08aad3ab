import { describe, expect, it } from 'vitest';
import {
  MAX_LABEL_VALUES,
  busMetricsSink,
  createMetrics,
  noopBusMetrics,
  noopStoreMetrics,
  storeMetricsSink,
  type BusMetrics,
  type StoreMetrics,
} from '../src/index.js';
import { register as globalRegistry } from 'prom-client';

const EXPECTED = {
  everdict_bus_published_total: { type: 'counter', labels: ['type'] },
  everdict_bus_confirmed_total: { type: 'counter', labels: [] },
  everdict_bus_consumed_total: { type: 'counter', labels: ['consumer', 'outcome'] },
  everdict_bus_duplicates_total: { type: 'counter', labels: ['consumer'] },
  everdict_bus_refused_total: { type: 'counter', labels: ['consumer', 'reason'] },
  everdict_bus_dead_lettered_total: { type: 'counter', labels: ['consumer', 'reason'] },
  everdict_bus_handler_duration_seconds: { type: 'histogram', labels: ['consumer'] },
  everdict_outbox_lag_seconds: { type: 'gauge', labels: [] },
  everdict_outbox_pending: { type: 'gauge', labels: [] },
  everdict_store_stale_fence_total: { type: 'counter', labels: ['operation'] },
  everdict_store_transactions_total: { type: 'counter', labels: ['outcome'] },
  everdict_store_transaction_duration_seconds: { type: 'histogram', labels: [] },
  everdict_config_reloads_total: { type: 'counter', labels: ['outcome'] },
} as const;

/** Labels that would be unbounded (ids) must never appear on any everdict_ metric. */
const FORBIDDEN_LABELS = /(^|_)(id|ids|case|task|message|msg)(_|$)|caseid|taskid|messageid/i;

function exercise(bus: BusMetrics, store: StoreMetrics) {
  bus.published('task.runnable', 3);
  bus.confirmed(3);
  bus.consumed('turn-worker', 'applied');
  bus.consumed('turn-worker', 'duplicate');
  bus.duplicate('turn-worker');
  bus.refused('turn-worker', 'payload_hash_mismatch');
  bus.deadLettered('turn-worker', 'unknown_type');
  bus.outboxLag(1.5, 7);
  bus.handlerSeconds('turn-worker', 0.012);
  store.staleFence('complete_task');
  store.transaction('commit', 0.004);
  store.transaction('rollback', 0.002);
}

describe('createMetrics', () => {
  it('registers every everdict_ metric with its type and bounded labels, on its own registry', async () => {
    const metrics = createMetrics({ service: 'unit' });
    exercise(busMetricsSink(metrics), storeMetricsSink(metrics));
    metrics.config.reloads.inc({ outcome: 'applied' });
    const json = await metrics.registry.getMetricsAsJSON();
    const ours = json.filter((m) => m.name.startsWith('everdict_'));
    expect(ours.map((m) => m.name).sort()).toEqual(Object.keys(EXPECTED).sort());
    for (const m of ours) {
      const want = EXPECTED[m.name as keyof typeof EXPECTED];
      expect(String(m.type), m.name).toBe(want.type);
      expect(m.help.length, `${m.name} has help`).toBeGreaterThan(10);
      const labels = new Set(m.values.flatMap((v) => Object.keys(v.labels)));
      labels.delete('service');
      labels.delete('le');
      expect([...labels].sort(), m.name).toEqual([...want.labels].sort());
      for (const l of labels) expect(l, `${m.name} label`).not.toMatch(FORBIDDEN_LABELS);
    }
    // The global registry stays untouched: two services in one process never collide.
    expect((await globalRegistry.getMetricsAsJSON()).filter((m) => m.name.startsWith('everdict_'))).toEqual([]);
    createMetrics({ service: 'second' });
  });

  it('follows Prometheus naming: everdict_ prefix, _total counters only, base units, snake case', async () => {
    const metrics = createMetrics({ service: 'unit' });
    const json = await metrics.registry.getMetricsAsJSON();
    expect(json.some((m) => m.name.startsWith('process_'))).toBe(true);
    for (const m of json) {
      expect(m.name).toMatch(/^[a-z][a-z0-9_]*$/);
      if (String(m.type) === 'counter') expect(m.name).toMatch(/_total$/);
      else expect(m.name).not.toMatch(/_total$/);
      expect(m.name).not.toMatch(/_(ms|milliseconds|minutes|hours|bytes_kb)(_|$)/);
    }
    const custom = json.filter((m) => !m.name.startsWith('process_') && !m.name.startsWith('nodejs_'));
    for (const m of custom) expect(m.name).toMatch(/^everdict_/);
  });

  it('the sinks record what the bus and store report', async () => {
    const metrics = createMetrics({ service: 'unit', defaultMetrics: false });
    exercise(busMetricsSink(metrics), storeMetricsSink(metrics));
    const text = await metrics.registry.metrics();
    expect(text).toContain('everdict_bus_published_total{type="task.runnable",service="unit"} 3');
    expect(text).toContain('everdict_bus_confirmed_total{service="unit"} 3');
    expect(text).toContain('everdict_bus_consumed_total{consumer="turn-worker",outcome="duplicate",service="unit"} 1');
    expect(text).toContain('everdict_bus_refused_total{consumer="turn-worker",reason="payload_hash_mismatch",service="unit"} 1');
    expect(text).toContain('everdict_outbox_lag_seconds{service="unit"} 1.5');
    expect(text).toContain('everdict_outbox_pending{service="unit"} 7');
    expect(text).toContain('everdict_store_stale_fence_total{operation="complete_task",service="unit"} 1');
    expect(text).toContain('everdict_store_transactions_total{outcome="rollback",service="unit"} 1');
    expect(text).toContain('everdict_store_transaction_duration_seconds_count{service="unit"} 2');
    expect(text).toContain('everdict_bus_handler_duration_seconds_count{service="unit",consumer="turn-worker"} 1');
  });

  it('folds label values past the cardinality cap into "other"', async () => {
    const metrics = createMetrics({ service: 'unit', defaultMetrics: false });
    const bus = busMetricsSink(metrics);
    for (let i = 0; i < MAX_LABEL_VALUES + 50; i++) bus.published(`type-${i}`);
    const [published] = (await metrics.registry.getMetricsAsJSON()).filter((m) => m.name === 'everdict_bus_published_total');
    expect(published?.values).toHaveLength(MAX_LABEL_VALUES + 1);
    expect(published?.values.find((v) => v.labels.type === 'other')?.value).toBe(50);
  });

  it('noop sinks satisfy the interfaces and do nothing', () => {
    expect(() => exercise(noopBusMetrics, noopStoreMetrics)).not.toThrow();
  });
});
