/**
 * The durable substrate of one service process: Postgres (migrated), the store with its metrics
 * sink, the transport with the topology asserted, and the outbox relay. Opening it registers
 * readiness checks and shutdown hooks in the order that makes the drain correct: hooks run in
 * reverse, so the relay drains its confirms before the broker closes, and the broker closes
 * before the pool.
 */
import { connectAmqp, loadTopology, startOutboxRelay } from '@everdict/bus';
import type { OutboxRelay, Topology, Transport } from '@everdict/bus';
import { busMetricsSink, storeMetricsSink } from '@everdict/service-kit';
import type { ServiceContext } from '@everdict/service-kit';
import { Store, createPgDb, migrate } from '@everdict/store';
import type { Db } from '@everdict/store';

interface SubstrateOptions {
  databaseUrl: string;
  amqpUrl: string;
  /** Broker name prefix (default "everdict"): tests and side-by-side fleets use their own. */
  amqpPrefix?: string;
  /** The broker topology, loaded and validated by the caller; default: loaded here with `amqpPrefix`. */
  topology?: Topology;
  /** Pool size (default 10). */
  poolSize?: number;
  /** Run the outbox relay in this process (default true). */
  relay?: boolean;
}

export interface Substrate {
  db: Db;
  store: Store;
  transport: Transport;
  relay: OutboxRelay | undefined;
}

export async function openSubstrate(ctx: ServiceContext, opts: SubstrateOptions): Promise<Substrate> {
  const db = createPgDb(opts.databaseUrl, { max: opts.poolSize ?? 10, applicationName: ctx.name });
  ctx.onShutdown('postgres', () => db.close());
  ctx.addReadinessCheck('postgres', () => db.ping());
  const migrated = await migrate(db);
  if (migrated.applied.length) ctx.logger.info({ applied: migrated.applied }, 'migrations applied');
  const store = new Store(db, { metrics: storeMetricsSink(ctx.metrics) });

  const prefix = opts.amqpPrefix ?? 'everdict';
  const transport = await connectAmqp({ url: opts.amqpUrl, topology: opts.topology ?? loadTopology({ prefix }), connectionName: `${prefix}-${ctx.name}-${process.pid}`, logger: ctx.logger });
  ctx.onShutdown('broker', () => transport.close());
  ctx.addReadinessCheck('broker', () => transport.isReady());

  let relay: OutboxRelay | undefined;
  if (opts.relay ?? true) {
    relay = await startOutboxRelay({ store, transport, name: `${ctx.name}-${process.pid}`, metrics: busMetricsSink(ctx.metrics), logger: ctx.logger });
    ctx.onShutdown('outbox relay', () => relay!.stop());
  }
  return { db, store, transport, relay };
}
