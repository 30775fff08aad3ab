/**
 * The turn-worker on a host substrate (Postgres, transport and outbox relay opened by
 * `openSubstrate`), as `everdict start` composes it, alone or
 * alongside the other services. Registers its drain as a shutdown hook (it runs before the
 * relay, broker and pool close).
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { systemClock } from '@everdict/contracts';
import type { KernelClock } from '@everdict/agent-runtime';
import type { Substrate } from '@everdict/host';
import { busMetricsSink } from '@everdict/service-kit';
import type { LoadedFleetConfig, ServiceContext } from '@everdict/service-kit';
import { Catalog } from './catalog.js';
import type { ReadConnectors } from './connectorReads.js';
import { noCrashPoints, type CrashPoints } from './crashpoints.js';
import { turnMetrics, type TurnMetrics } from './metrics.js';
import type { TurnTiming } from './turn.js';
import { SERVICE, TurnWorker } from './worker.js';

interface TurnWorkerServiceOptions {
  /** Fault injection (default none; `everdict start` reads EVERDICT_CRASHPOINT). */
  readonly crash?: CrashPoints;
  /** File every real model call is logged to (default none). */
  readonly modelLog?: string | null;
  /** Lease owner prefix (default the host name). */
  readonly workerName?: string;
  /** Keep raw per-turn overhead samples (benchmark; default false). */
  readonly keepSamples?: boolean;
  /** The connectors profiles' `reads` call (default none: a profile's reads get no tool). */
  readonly connectors?: ReadConnectors;
}

interface RunningTurnWorker {
  readonly worker: TurnWorker;
  readonly catalog: Catalog;
  readonly metrics: TurnMetrics;
  /** Swaps the fleet config: the next model call of every task uses the new routes. */
  replaceFleet(next: LoadedFleetConfig): void;
}

/** The kernel's clock: wall time for active-minute accounting and backoff (never leases). */
const systemKernelClock: KernelClock = {
  now: () => systemClock.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      signal?.addEventListener('abort', () => {
        clearTimeout(t);
        resolve();
      });
    }),
};

export async function startTurnWorker(ctx: ServiceContext, substrate: Substrate, fleet: LoadedFleetConfig, opts: TurnWorkerServiceOptions = {}): Promise<RunningTurnWorker> {
  const timings = new Map<string, TurnTiming>();
  const metrics = turnMetrics(ctx.metrics.registry, { keepSamples: opts.keepSamples ?? false });
  const catalog = new Catalog(fleet, { db: substrate.db, timing: (taskId) => timings.get(taskId), logger: ctx.logger, modelCalls: metrics, ...(opts.connectors ? { connectors: opts.connectors } : {}) });
  const worker = new TurnWorker({
    store: substrate.store,
    transport: substrate.transport,
    catalog,
    logger: ctx.logger,
    metrics,
    busMetrics: busMetricsSink(ctx.metrics),
    crash: opts.crash ?? noCrashPoints,
    clock: systemKernelClock,
    timings,
    owner: `${opts.workerName ?? hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`,
    modelLog: opts.modelLog ?? null,
    relay: substrate.relay === undefined,
  });
  await worker.start();
  // The MCP servers close after the last turn: a draining turn may still call their tools.
  ctx.onShutdown(SERVICE, async () => {
    await worker.stop();
    await catalog.close();
  });
  return { worker, catalog, metrics, replaceFleet: (next) => catalog.replace(next) };
}
