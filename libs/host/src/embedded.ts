/**
 * The embedded substrate (DESIGN §7): with neither DATABASE_URL nor AMQP_URL, one process runs
 * every service on a file-backed PGlite database and the in-process transport — the same store,
 * the same unit of work, the same inbox dedup, the same fencing; only the two adapters differ.
 *
 * Ordering invariants (they differ from `openSubstrate` because the transport lives in memory):
 * - The relay is built here but started by `startRelay()` AFTER every service has subscribed.
 *   The in-process transport confirms a message to a queue without subscribers at once (as a
 *   broker queue would), so a relay started earlier could mark rows published that then exist
 *   only in memory.
 * - The relay's shutdown hook is registered by `startRelay()`, i.e. after the services' hooks,
 *   so the drain stops it FIRST: its in-flight confirms need the consumers to settle them, and
 *   the consumers are still running. What it has not published stays in the outbox and is
 *   published at the next start (the inbox makes a repeat harmless).
 * - Then the services drain, then the transport closes, then the database closes (and its
 *   directory lock is released).
 */
import { InProcessTransport, OutboxRelay, loadTopology } from '@everdict/bus';
import type { Topology } from '@everdict/bus';
import { busMetricsSink, storeMetricsSink } from '@everdict/service-kit';
import type { ServiceContext } from '@everdict/service-kit';
import { Store, createPgliteDb, migrate } from '@everdict/store';
import type { Substrate } from './substrate.js';

interface EmbeddedSubstrateOptions {
  /** Folder of the embedded database (created if missing), or 'memory' for a throwaway one. */
  dataDir: string;
  /** Topology name prefix (default "everdict"); only names the in-memory queues here. */
  amqpPrefix?: string;
  /** The topology, loaded and validated by the caller; default: loaded here with `amqpPrefix`. */
  topology?: Topology;
  /** Relay poll interval when no notification arrives, in ms (default 1000). */
  relayPollMs?: number;
}

interface EmbeddedSubstrate extends Substrate {
  /** Starts the outbox relay; call once every service has subscribed. Idempotent. */
  startRelay(): Promise<void>;
}

export async function openEmbeddedSubstrate(ctx: ServiceContext, opts: EmbeddedSubstrateOptions): Promise<EmbeddedSubstrate> {
  const db = await createPgliteDb(opts.dataDir);
  ctx.onShutdown('embedded postgres', () => db.close());
  ctx.addReadinessCheck('postgres', () => db.ping());
  const migrated = await migrate(db);
  if (migrated.applied.length) ctx.logger.info({ applied: migrated.applied }, 'migrations applied');
  const store = new Store(db, { metrics: storeMetricsSink(ctx.metrics) });

  const transport = new InProcessTransport(opts.topology ?? loadTopology({ prefix: opts.amqpPrefix ?? 'everdict' }));
  ctx.onShutdown('in-process transport', () => transport.close());
  ctx.addReadinessCheck('transport', () => transport.isReady());

  const relay = new OutboxRelay({
    store,
    transport,
    name: `${ctx.name}-${process.pid}`,
    metrics: busMetricsSink(ctx.metrics),
    logger: ctx.logger,
    ...(opts.relayPollMs === undefined ? {} : { pollMs: opts.relayPollMs }),
  });
  let started: Promise<void> | undefined;
  return {
    db,
    store,
    transport,
    relay,
    startRelay() {
      started ??= (async () => {
        ctx.onShutdown('outbox relay', () => relay.stop());
        await relay.start();
      })();
      return started;
    },
  };
}
