/** The one jitter rule of the fleet's retry backoffs, and Retry-After parsing. */
import { describe, expect, it } from 'vitest';
import { jitteredBackoffMs, parseRetryAfterMs } from '../src/index.js';

describe('jitteredBackoffMs', () => {
  it('draws from [ms/2, ms] (equal jitter)', () => {
    expect(jitteredBackoffMs(1000, { random: () => 0 })).toBe(500);
    expect(jitteredBackoffMs(1000, { random: () => 0.5 })).toBe(750);
    expect(jitteredBackoffMs(1000, { random: () => 0.999999 })).toBe(1000);
  });

  it('spreads retries: many draws of the same backoff differ', () => {
    const draws = new Set(Array.from({ length: 50 }, () => jitteredBackoffMs(10_000)));
    expect(draws.size).toBeGreaterThan(10);
    for (const d of draws) expect(d).toBeGreaterThanOrEqual(5_000);
  });

  it('honours a floor (Retry-After) and still spreads above it', () => {
    expect(jitteredBackoffMs(1000, { floorMs: 30_000, random: () => 0 })).toBe(30_000);
    expect(jitteredBackoffMs(1000, { floorMs: 30_000, random: () => 0.5 })).toBe(30_500);
    expect(jitteredBackoffMs(1000, { floorMs: 4_000, random: () => 0.5 })).toBe(4_200);
    // A backoff already above the floor is unaffected by it.
    expect(jitteredBackoffMs(100_000, { floorMs: 1_000, random: () => 0 })).toBe(50_000);
  });

  it('refuses a random source outside [0, 1)', () => {
    expect(() => jitteredBackoffMs(1000, { random: () => 1 })).toThrow(RangeError);
  });
});

describe('parseRetryAfterMs', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  it.each([
    ['3', 3000],
    ['0.5', 500],
    ['Thu, 01 Jan 2026 00:00:10 GMT', 10_000],
    ['99999999', 3_600_000],
  ])('%s → %i ms', (v, ms) => expect(parseRetryAfterMs(v, now)).toBe(ms));

  it.each([null, undefined, '', 'soon', '-1', '0', 'Wed, 31 Dec 2025 23:59:00 GMT'])('%s → undefined', (v) => expect(parseRetryAfterMs(v, now)).toBeUndefined());
});
