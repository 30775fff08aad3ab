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
    m.parkedOldest([{ park_reason: 'gate', age_seconds: 12.5 }]);
    const text = await registry.metrics();
    expect(text).toContain('# TYPE everdict_effect_unknown_outcomes gauge');
    expect(text).toContain('everdict_effect_unknown_outcomes 3');
    expect(text).toContain('# TYPE everdict_task_lease_expiries_total counter');
    expect(text).toContain('everdict_task_lease_expiries_total 2');
    expect(text).toContain('everdict_tasks_parked_oldest_age_seconds{park_reason="gate"} 12.5');
    expect(text).toContain('everdict_tasks_parked_oldest_age_seconds{park_reason="question"} 0');
  });
});
