/** provider_down / connector_down park timers: exponential, jittered, never below Retry-After. */
import { describe, expect, it } from 'vitest';
import type { FleetConfig } from '@everdict/contracts';
import { providerBackoffMs, runtimeSettings } from '../src/index.js';

const settings = runtimeSettings({ version: 1, routes: {}, profiles: {}, caseTypes: {}, runtime: { providerBackoffMs: { initial: 1_000, max: 8_000 } } } as unknown as FleetConfig);

describe('providerBackoffMs', () => {
  it('doubles per attempt up to max, each draw jittered into [ceiling/2, ceiling]', () => {
    for (const [attempt, ceiling] of [[1, 1_000], [2, 2_000], [3, 4_000], [4, 8_000], [9, 8_000]] as const) {
      const draws = Array.from({ length: 40 }, () => providerBackoffMs(settings, attempt));
      for (const d of draws) expect(d).toSatisfy((v: number) => v >= ceiling / 2 && v <= ceiling);
      expect(new Set(draws).size).toBeGreaterThan(5);
    }
  });

  it("a provider's Retry-After is the floor", () => {
    for (let i = 0; i < 20; i++) expect(providerBackoffMs(settings, 1, 60_000)).toSatisfy((v: number) => v >= 60_000 && v <= 61_000);
    expect(providerBackoffMs(settings, 4, 100)).toBeGreaterThanOrEqual(4_000);
  });
});
