/**
 * Turn-worker tunables from the fleet config's `runtime` section, each with its default.
 */
import type { FleetConfig } from '@everdict/contracts';
import { jitteredBackoffMs } from '@everdict/contracts';
import { DEFAULT_VERSION_POLICY, type VersionPolicy } from './versions.js';

export interface RuntimeSettings {
  /** Task lease on the database clock (default 30 000 ms); renewed every third of it. */
  readonly leaseTtlMs: number;
  /** Turns one claim runs before the task is released and re-queued (default 50). */
  readonly turnsPerActivation: number;
  /** Tasks this process runs at once (default 256). */
  readonly maxActiveTasks: number;
  /** Unsettled deliveries (default 64). */
  readonly prefetch: number;
  /** Expired-lease and wake-up sweep period (default 1000 ms). */
  readonly sweepIntervalMs: number;
  /** provider_down backoff: initial (default 1000 ms), doubling up to max (default 300 000 ms). */
  readonly providerBackoff: { readonly initial: number; readonly max: number };
  readonly versionPolicy: VersionPolicy;
  /**
   * Postgres pool size (default 4). The hot path is group-committed over at most 2 connections and
   * no connection is held across a model call, so the rest serve claims, restores and parks. A
   * small pool keeps the server's active backends near its cores: on the 2-core bench machine,
   * 24 → 4 raised peak turns/s by 20–40% and cut server CPU per turn by ~40% (lock and
   * scheduler contention among backends), while queueing a restore in the pool costs microseconds.
   */
  readonly dbPoolSize: number;
  /**
   * Deliveries that share one inbox unit of work (not in the fleet config; 64): the claims
   * that are ready together cost one BEGIN + inbox statement, one claim statement (claimTasksAhead,
   * when no per-case cap applies) and one COMMIT instead of one each.
   */
  readonly inboxBatchSize: number;
}

export function runtimeSettings(config: FleetConfig): RuntimeSettings {
  const r = config.runtime ?? {};
  return {
    leaseTtlMs: r.leaseTtlMs ?? 30_000,
    turnsPerActivation: r.turnsPerActivation ?? 50,
    maxActiveTasks: r.maxActiveTasks ?? 256,
    prefetch: r.prefetch ?? 64,
    sweepIntervalMs: r.sweepIntervalMs ?? 1_000,
    providerBackoff: { initial: r.providerBackoffMs?.initial ?? 1_000, max: r.providerBackoffMs?.max ?? 300_000 },
    versionPolicy: { ...DEFAULT_VERSION_POLICY, ...(r.versionPolicy ?? {}) },
    dbPoolSize: r.dbPoolSize ?? 4,
    inboxBatchSize: 64,
  };
}

/**
 * Backoff before the `attempt`-th re-try (1-based): initial · 2^(attempt-1), capped at max, with
 * the fleet's equal jitter (contracts `jitteredBackoffMs`) so parks that failed together do not
 * wake together; never below `floorMs` (the provider's Retry-After).
 */
export function providerBackoffMs(s: RuntimeSettings, attempt: number, floorMs?: number | null): number {
  return jitteredBackoffMs(Math.min(s.providerBackoff.initial * 2 ** Math.max(0, attempt - 1), s.providerBackoff.max), { floorMs: floorMs ?? null });
}
