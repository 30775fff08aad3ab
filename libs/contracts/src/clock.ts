/**
 * Time as an injected dependency. Decision code never reads the wall clock itself (lint forbids
 * `Date.now()` in contracts and agent-runtime); it receives a `Clock`. Lease and timer logic use
 * the DATABASE clock instead (DESIGN §4): this clock only stamps facts such as `createdAt`.
 */
export interface Clock {
  /** The current instant. Each call returns a fresh Date the caller may keep. */
  now(): Date;
}

/**
 * The process wall clock: the one place in contracts allowed to read ambient time, so that
 * every other module stays deterministic under a test clock.
 */
export const systemClock: Clock = {
  // eslint-disable-next-line no-restricted-syntax -- systemClock IS the injected clock; reading wall time here is its whole job.
  now: () => new Date(Date.now()),
};

/** A clock that moves only when told to; for tests and deterministic replays. */
interface ManualClock extends Clock {
  /** Moves the clock forward (or backward, for a negative value) by `ms` milliseconds. */
  advance(ms: number): void;
  /** Jumps to an absolute instant. */
  set(at: Date | string): void;
}

export function manualClock(start: Date | string): ManualClock {
  let current = toEpochMs(start);
  return {
    now: () => new Date(current),
    advance: (ms) => {
      current += ms;
    },
    set: (at) => {
      current = toEpochMs(at);
    },
  };
}

function toEpochMs(at: Date | string): number {
  const ms = (typeof at === 'string' ? new Date(at) : at).getTime();
  if (Number.isNaN(ms)) throw new RangeError('manualClock: not a valid instant');
  return ms;
}
