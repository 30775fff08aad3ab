/**
 * `startReconciler`: the reconciler's timer loop plus its `effect.outcome` inbox consumer (an
 * unknown outcome wakes it at once). Stateless: N reconcilers share the work through SKIP
 * LOCKED sweeps and claims with a lease on the database clock.
 */
import { systemClock } from '@everdict/contracts';
import type { Clock, FleetConfig } from '@everdict/contracts';
import type { ConnectorSet } from '@everdict/connectors';
import { startInboxConsumer } from '@everdict/bus';
import type { Substrate } from '@everdict/host';
import { busMetricsSink } from '@everdict/service-kit';
import type { ServiceContext } from '@everdict/service-kit';
import { effectOutcomeHandler } from './handler.js';
import { reconcilerMetrics } from './metrics.js';
import { ReconcilerLoop } from './reconciler.js';
import { RECONCILER_SERVICE } from './sweeps.js';
import type { Backoff } from './whatLanded.js';

interface ReconcilerOptions {
  readonly connectors: ConnectorSet;
  readonly intervalMs?: number;
  readonly backoff?: Backoff;
  readonly maxAttempts?: number;
  readonly leaseMs?: number;
  readonly outboxGraceMs?: number;
  readonly clock?: Clock;
}

interface RunningReconciler {
  readonly loop: ReconcilerLoop;
}

export async function startReconciler(ctx: ServiceContext, substrate: Substrate, fleet: FleetConfig, opts: ReconcilerOptions): Promise<RunningReconciler> {
  const loop = new ReconcilerLoop({
    store: substrate.store,
    connectors: opts.connectors,
    metrics: reconcilerMetrics(ctx.metrics.registry),
    logger: ctx.logger,
    clock: opts.clock ?? systemClock,
    fleet,
    ...(opts.intervalMs === undefined ? {} : { intervalMs: opts.intervalMs }),
    ...(opts.backoff === undefined ? {} : { backoff: opts.backoff }),
    ...(opts.maxAttempts === undefined ? {} : { maxAttempts: opts.maxAttempts }),
    ...(opts.leaseMs === undefined ? {} : { leaseMs: opts.leaseMs }),
    ...(opts.outboxGraceMs === undefined ? {} : { outboxGraceMs: opts.outboxGraceMs }),
  });
  await loop.start();
  ctx.onShutdown('reconciler loop', () => loop.stop());
  const consumer = await startInboxConsumer({
    store: substrate.store,
    transport: substrate.transport,
    service: RECONCILER_SERVICE,
    handlers: { 'effect.outcome': effectOutcomeHandler() },
    prefetch: 16,
    // Outcomes ready together share one unit of work (libs/bus consumer, batched mode): the
    // handler only moves dispatch rows in it, so a batch that rolls back is simply redone
    // delivery by delivery.
    batchSize: 16,
    metrics: busMetricsSink(ctx.metrics),
    logger: ctx.logger,
  });
  ctx.onShutdown('reconciler consumer', () => consumer.stop());
  ctx.logger.info({ connectors: opts.connectors.names() }, 'reconciler started');
  return { loop };
}
