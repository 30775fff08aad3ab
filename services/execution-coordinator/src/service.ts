/**
 * `startExecutionCoordinator`: the `gate.decided` inbox consumer plus the dispatch loop on one
 * process. Stateless between units of work: claims live in Postgres with a lease on the database
 * clock, so N coordinators share the work and a dead one's claims lapse to the others (and an
 * execution it had started goes to reconciliation, never to a second execute).
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { EverdictError, systemClock } from '@everdict/contracts';
import type { Clock, FleetConfig } from '@everdict/contracts';
import type { ConnectorSet } from '@everdict/connectors';
import { startInboxConsumer } from '@everdict/bus';
import type { Substrate } from '@everdict/host';
import { busMetricsSink } from '@everdict/service-kit';
import type { ServiceContext } from '@everdict/service-kit';
import type { CrashPoints } from './crashpoints.js';
import { noCrashPoints } from './crashpoints.js';
import type { Backoff } from './dispatcher.js';
import { COORDINATOR_SERVICE, Dispatcher } from './dispatcher.js';
import { gateDecidedHandler } from './handler.js';

interface CoordinatorOptions {
  readonly connectors: ConnectorSet;
  /** Claim lease in ms (default 30000); a dead coordinator's executions reach reconciliation after it. */
  readonly leaseMs?: number;
  /** Poll interval in ms when no notification arrives (default 1000). */
  readonly pollMs?: number;
  /** Dispatches at once (default 8). */
  readonly concurrency?: number;
  readonly preflightBackoff?: Backoff;
  readonly crash?: CrashPoints;
  readonly clock?: Clock;
  /** Claim owner name (default host:pid:random). */
  readonly owner?: string;
}

interface RunningCoordinator {
  readonly dispatcher: Dispatcher;
}

export async function startExecutionCoordinator(ctx: ServiceContext, substrate: Substrate, fleet: FleetConfig, opts: CoordinatorOptions): Promise<RunningCoordinator> {
  // The set is built from the same `connectors` section (libs/connectors openConnectors); a
  // composition handing a set without some declared connector is a bug, refused before any claim.
  const missing = Object.keys(fleet.connectors ?? {}).filter((name) => opts.connectors.get(name) === undefined);
  if (missing.length > 0) {
    throw new EverdictError('config_invalid', `connectors declared by the fleet config were not opened: ${missing.join(', ')}`, { details: { path: `/connectors/${missing[0]!}` } });
  }
  const owner = opts.owner ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const dispatcher = new Dispatcher({
    store: substrate.store,
    connectors: opts.connectors,
    shapeVersionOf: (connector, operation) => fleet.connectors?.[connector]?.operations[operation]?.shapeVersion ?? '1',
    owner,
    logger: ctx.logger,
    crash: opts.crash ?? noCrashPoints,
    clock: opts.clock ?? systemClock,
    ...(opts.leaseMs === undefined ? {} : { leaseMs: opts.leaseMs }),
    ...(opts.pollMs === undefined ? {} : { pollMs: opts.pollMs }),
    ...(opts.concurrency === undefined ? {} : { concurrency: opts.concurrency }),
    ...(opts.preflightBackoff === undefined ? {} : { preflightBackoff: opts.preflightBackoff }),
  });
  await dispatcher.start();
  ctx.onShutdown('dispatcher', () => dispatcher.stop());
  const consumer = await startInboxConsumer({
    store: substrate.store,
    transport: substrate.transport,
    service: COORDINATOR_SERVICE,
    handlers: { 'gate.decided': gateDecidedHandler(ctx.logger) },
    prefetch: 16,
    // Approvals ready together share one unit of work (libs/bus consumer, batched mode): the
    // handler only queues dispatch rows in it (nothing external happens here), so a batch that
    // rolls back is simply redone delivery by delivery.
    batchSize: 16,
    metrics: busMetricsSink(ctx.metrics),
    logger: ctx.logger,
  });
  ctx.onShutdown('coordinator consumer', () => consumer.stop());
  ctx.logger.info({ owner, connectors: opts.connectors.names() }, 'execution coordinator started');
  return { dispatcher };
}
