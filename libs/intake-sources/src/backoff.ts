/**
 * Reconnect backoff: exponential, capped, with "equal jitter". Pure — randomness is injected.
 *
 * Delay for attempt n (0-based) is drawn uniformly from [cap/2, cap] where
 * cap = min(maxMs, baseMs * factor^n). The lower half is kept so that a fleet of monitors that
 * lost the same server does not come back in a tight loop (full jitter can draw ~0 ms), and the
 * random upper half spreads their reconnects so they do not arrive at the server in one burst.
 */
import { jitteredBackoffMs } from '@everdict/contracts';

export interface BackoffPolicy {
  /** First delay ceiling in ms. Default 1000. */
  baseMs: number;
  /** Ceiling for every delay in ms. Default 60000. */
  maxMs: number;
  /** Growth per attempt. Default 2. */
  factor: number;
}

export const DEFAULT_BACKOFF: Readonly<BackoffPolicy> = Object.freeze({ baseMs: 1_000, maxMs: 60_000, factor: 2 });

/** A source of uniform numbers in [0, 1); `Math.random` in production, fixed sequences in tests. */
export type RandomSource = () => number;

/** The ceiling of attempt `attempt` before jitter. */
export function backoffCeiling(attempt: number, policy: BackoffPolicy = DEFAULT_BACKOFF): number {
  if (!Number.isInteger(attempt) || attempt < 0) throw new RangeError(`backoff attempt must be a non-negative integer, got ${attempt}`);
  if (!(policy.baseMs > 0) || !(policy.maxMs >= policy.baseMs) || !(policy.factor >= 1)) {
    throw new RangeError('backoff policy needs baseMs > 0, maxMs >= baseMs and factor >= 1');
  }
  // Exponent capped so that factor^n cannot overflow to Infinity for very long outages.
  const grown = policy.baseMs * Math.pow(policy.factor, Math.min(attempt, 64));
  return Math.min(policy.maxMs, grown);
}

/** The delay (whole ms) before reconnect attempt `attempt`. */
export function backoffDelay(attempt: number, random: RandomSource, policy: BackoffPolicy = DEFAULT_BACKOFF): number {
  // The fleet's one jitter rule (contracts): a draw from [ceiling/2, ceiling].
  return jitteredBackoffMs(backoffCeiling(attempt, policy), { random });
}
