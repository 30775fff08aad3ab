/**
 * The ONE jitter rule every retry backoff in the fleet uses, so that processes which failed
 * together (a Postgres restart, a provider's 429 wave) do not come back together.
 *
 * "Equal jitter": the delay is drawn uniformly from [ms/2, ms]. The lower half is kept so a
 * backoff never collapses to ~0 ms (full jitter can), the upper half spreads the retries.
 * A floor (a provider's `Retry-After`) is honoured as a lower bound: a delay below it is raised
 * to the floor plus up to a tenth of it (at most 1 s), so a wave told the same `Retry-After`
 * still spreads out. Pure: randomness is injected.
 */

/** Uniform numbers in [0, 1); `Math.random` in production, fixed values in tests. */
export type Random = () => number;

const MAX_FLOOR_SPREAD_MS = 1_000;

/** `ms` with equal jitter, never below `floorMs`; whole milliseconds. */
export function jitteredBackoffMs(ms: number, opts: { floorMs?: number | null; random?: Random } = {}): number {
  const random = opts.random ?? Math.random;
  const r = random();
  if (!(r >= 0 && r < 1)) throw new RangeError(`random source must return a number in [0, 1), got ${r}`);
  const base = Math.max(0, Number.isFinite(ms) ? ms : 0);
  const jittered = base / 2 + r * (base / 2);
  const floor = opts.floorMs ?? 0;
  if (!(floor > 0) || jittered >= floor) return Math.round(jittered);
  return Math.round(floor + r * Math.min(floor / 10, MAX_FLOOR_SPREAD_MS));
}

/**
 * An HTTP `Retry-After` value (delta-seconds or an HTTP date) in ms from `nowMs`; undefined when
 * absent, unparsable or in the past. Capped at one hour: a provider's header must not park a
 * task for a day.
 */
export function parseRetryAfterMs(value: string | null | undefined, nowMs: number): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (text === '') return undefined;
  let ms: number;
  if (/^\d+(\.\d+)?$/.test(text)) ms = Number(text) * 1000;
  else {
    const at = Date.parse(text);
    if (!Number.isFinite(at)) return undefined;
    ms = at - nowMs;
  }
  if (!(ms > 0)) return undefined;
  return Math.min(Math.round(ms), 3_600_000);
}
