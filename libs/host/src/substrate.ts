/**
 * The durable substrate of one service process: Postgres (migrated), the store with its metrics
 * sink, the transport with the topology asserted, and the outbox relay. Opening it registers
 * readiness checks and shutdown hooks in the order that makes the drain correct: hooks run in
 * reverse, so the relay drains its confirms before the broker closes, and the broker closes
 * before the pool.
 */
import { connectAmqp, connectAmqpPerService, loadTopology, startOutboxRelay } from '@everdict/bus';
import type { BrokerLogin, OutboxRelay, Topology, Transport } from '@everdict/bus';
import { busMetricsSink, storeMetricsSink } from '@everdict/service-kit';
import type { ServiceContext } from '@everdict/service-kit';
import { Store, createPgDb, ensureSchema } from '@everdict/store';
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
  /**
   * Apply pending migrations when the role may (default true); false, or a role without CREATE,
   * waits not-ready until `everdict migrate` brought the schema up to date.
   */
  migrateOnStart?: boolean;
  /** TLS socket options for amqps:// broker URLs (service-kit `amqpTlsOptions`). */
  amqpTls?: { ca?: Buffer[]; cert?: Buffer; key?: Buffer };
  /** How the node's services log in to the broker (default: all as AMQP_URL's user, shared). */
  brokerLogin?: BrokerLogin;
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
  await ensureSchema(db, {
    migrateOnStart: opts.migrateOnStart ?? true,
    signal: ctx.signal,
    onBehind: (message) => ctx.logger.warn({ reason: message }, 'not ready: database schema not migrated; waiting'),
    onApplied: (applied) => ctx.logger.info({ applied }, 'migrations applied'),
  });
  const store = new Store(db, { metrics: storeMetricsSink(ctx.metrics) });

  const prefix = opts.amqpPrefix ?? 'everdict';
  const topology = opts.topology ?? loadTopology({ prefix });
  const connectionName = `${prefix}-${ctx.name}-${process.pid}`;
  const login = opts.brokerLogin ?? { mode: 'shared' as const, url: opts.amqpUrl };
  // Per-service users: one connection per service of the node, each publishing only its own rows.
  const transport: Transport =
    login.mode === 'per_service'
      ? await connectAmqpPerService({ topology, identity: login.identity, urls: login.urls, connectionName, logger: ctx.logger, ...(opts.amqpTls ? { tls: opts.amqpTls } : {}) })
      : await connectAmqp({ url: login.url, topology, connectionName, logger: ctx.logger, ...(opts.amqpTls ? { tls: opts.amqpTls } : {}) });
  if (login.mode === 'shared') ctx.logger.warn({ brokerIdentity: 'shared' }, 'every service uses one broker user (EVERDICT_AMQP_USERS unset): producers are not told apart; development and tests only');
  ctx.onShutdown('broker', () => transport.close());
  ctx.addReadinessCheck('broker', () => transport.isReady());

  let relay: OutboxRelay | undefined;
  if (opts.relay ?? true) {
    relay = await startOutboxRelay({
      store,
      transport,
      name: `${ctx.name}-${process.pid}`,
      metrics: busMetricsSink(ctx.metrics),
      logger: ctx.logger,
      ...(login.mode === 'per_service' ? { producers: Object.keys(login.urls) } : {}),
    });
    ctx.onShutdown('outbox relay', () => relay!.stop());
  }
  return { db, store, transport, relay };
}
