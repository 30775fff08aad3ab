/** The consumer's pure decisions: when a failed delivery is requeued or dead-lettered, and backoff. */
import { describe, expect, it } from 'vitest';
import { backoffMs, failureSettlement } from '../src/consumer.js';

describe('consumer decisions', () => {
  it('requeues until the delivery limit, then dead-letters the last attempt', () => {
    // With x-delivery-limit 5 the broker delivers at most 6 times: counts 0..5.
    expect([0, 1, 2, 3, 4].map((n) => failureSettlement(n, 5))).toEqual(Array(5).fill('requeue'));
    expect(failureSettlement(5, 5)).toBe('dead_letter');
    expect(failureSettlement(9, 5)).toBe('dead_letter');
    expect(failureSettlement(0, 0)).toBe('dead_letter');
  });

  it('a retryable failure (the database down) is requeued, never dead-lettered by the consumer', () => {
    expect([0, 5, 9].map((n) => failureSettlement(n, 5, true))).toEqual(['requeue', 'requeue', 'requeue']);
  });

  it('backs off exponentially and caps at two seconds', () => {
    expect([0, 1, 2, 3].map((a) => backoffMs(a, 100))).toEqual([100, 200, 400, 800]);
    expect(backoffMs(10, 100)).toBe(2000);
  });
});
