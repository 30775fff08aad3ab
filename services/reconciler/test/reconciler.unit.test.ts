import { describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { reconcilerMetrics, recheckDelay } from '../src/index.js';

describe('reconciler', () => {
  it('backs off repeated inconclusive WhatLanded checks, capped', () => {
    expect([0, 1, 2, 3, 20].map((n) => recheckDelay(n, { initialMs: 250, maxMs: 1500 }))).toEqual([250, 500, 1000, 1500, 1500]);
  });

  it('exports the catalogued metrics with bounded labels only', async () => {
    const registry = new Registry();
    const m = reconcilerMetrics(registry);
    m.unknownOutcomes(3);
    m.leaseExpiries(2);
    m.leaseExpiries(0);
    m.parkedOldest([{ park_reason: 'gate', age_seconds: 12.5, parked: 4 }]);
    m.openGates([{ kind: 'write', open: 3, p50: 10, p90: 50, p99: 59, oldest: 60 }]);
    const text = await registry.metrics();
    expect(text).toContain('# TYPE everdict_effect_unknown_outcomes gauge');
    expect(text).toContain('everdict_effect_unknown_outcomes 3');
    expect(text).toContain('# TYPE everdict_task_lease_expiries_total counter');
    expect(text).toContain('everdict_task_lease_expiries_total 2');
    expect(text).toContain('everdict_tasks_parked_oldest_age_seconds{park_reason="gate"} 12.5');
    expect(text).toContain('everdict_tasks_parked_oldest_age_seconds{park_reason="question"} 0');
    expect(text).toContain('everdict_tasks_parked{park_reason="gate"} 4');
    expect(text).toContain('everdict_tasks_parked{park_reason="question"} 0');
    expect(text).toContain('everdict_gates_open{kind="write"} 3');
    expect(text).toContain('everdict_gates_open{kind="consent"} 0');
    expect(text).toContain('everdict_gate_open_wait_seconds{kind="write",stat="p99"} 59');
    expect(text).toContain('everdict_gate_open_wait_seconds{kind="write",stat="max"} 60');
    expect(text).toContain('everdict_gate_open_wait_seconds{kind="consent",stat="p50"} 0');
  });
});
