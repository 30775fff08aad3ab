/**
 * The turn-worker process (DESIGN §2). Env: DATABASE_URL, AMQP_URL, EVERDICT_CONFIG (required),
 * PORT, LOG_LEVEL; EVERDICT_AMQP_PREFIX (broker name prefix, default `everdict`),
 * EVERDICT_WORKER_NAME (lease owner prefix, default the host name); for fault tests and the
 * benchmark only: EVERDICT_CRASHPOINT, EVERDICT_CRASH_LOG, EVERDICT_MODEL_LOG,
 * EVERDICT_BENCH_SAMPLES (file the per-turn overhead samples are written to at shutdown).
 *
 * SIGHUP reloads the fleet config: a swapped route serves the next model call of every task;
 * an invalid file is refused and the running config stays.
 */
import { writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { EverdictError, systemClock } from '@everdict/contracts';
import { connectAmqp, loadTopology } from '@everdict/bus';
import { ConfigError, busMetricsSink, envVar, loadFleetConfig, parseString, runService, storeMetricsSink } from '@everdict/service-kit';
import { Store, createPgDb, migrate } from '@everdict/store';
import type { KernelClock } from '@everdict/agent-runtime';
import { Catalog } from './catalog.js';
import { crashPointsFromEnv } from './crashpoints.js';
import { turnMetrics } from './metrics.js';
import { runtimeSettings } from './settings.js';
import type { TurnTiming } from './turn.js';
import { SERVICE, TurnWorker } from './worker.js';

const clock: KernelClock = {
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

await runService({
  name: SERVICE,
  extraEnv: {
    amqpPrefix: envVar('EVERDICT_AMQP_PREFIX', parseString, { default: 'everdict' }),
    workerName: envVar('EVERDICT_WORKER_NAME', parseString),
    modelLog: envVar('EVERDICT_MODEL_LOG', parseString),
    benchSamples: envVar('EVERDICT_BENCH_SAMPLES', parseString),
  },
  async start(ctx) {
    const { databaseUrl, amqpUrl, configPath } = ctx.config;
    const missing = [
      ...(databaseUrl ? [] : [{ name: 'DATABASE_URL', reason: 'is required by a separate turn-worker process (the all-in-one `npm start` runs embedded)' }]),
      ...(amqpUrl ? [] : [{ name: 'AMQP_URL', reason: 'is required by a separate turn-worker process' }]),
      ...(configPath ? [] : [{ name: 'EVERDICT_CONFIG', reason: 'is required: the fleet config declares routes, profiles and tools' }]),
    ];
    if (missing.length > 0) throw new ConfigError(missing);
    const loaded = loadFleetConfig(configPath!);
    const settings = runtimeSettings(loaded.config);

    const db = createPgDb(databaseUrl!, { max: settings.dbPoolSize, applicationName: SERVICE });
    ctx.onShutdown('postgres', () => db.close());
    await migrate(db);
    const store = new Store(db, { metrics: storeMetricsSink(ctx.metrics) });
    ctx.addReadinessCheck('postgres', () => db.ping());

    const owner = `${ctx.config.workerName ?? hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
    const transport = await connectAmqp({ url: amqpUrl!, topology: loadTopology({ prefix: ctx.config.amqpPrefix }), connectionName: `${ctx.config.amqpPrefix}-${SERVICE}-${owner}`, logger: ctx.logger });
    ctx.onShutdown('broker', () => transport.close());
    ctx.addReadinessCheck('broker', () => transport.isReady());

    const timings = new Map<string, TurnTiming>();
    const catalog = new Catalog(loaded, { db, timing: (taskId) => timings.get(taskId) });
    const metrics = turnMetrics(ctx.metrics.registry, { keepSamples: ctx.config.benchSamples !== undefined });
    const worker = new TurnWorker({
      store,
      transport,
      catalog,
      logger: ctx.logger,
      metrics,
      busMetrics: busMetricsSink(ctx.metrics),
      crash: crashPointsFromEnv(),
      clock,
      timings,
      owner,
      modelLog: ctx.config.modelLog ?? null,
    });
    await worker.start();
    ctx.onShutdown(SERVICE, async () => {
      await worker.stop();
      if (ctx.config.benchSamples && metrics.samples) writeFileSync(ctx.config.benchSamples, JSON.stringify(metrics.samples));
    });

    process.on('SIGHUP', () => {
      try {
        catalog.replace(loadFleetConfig(configPath!));
        ctx.logger.info({ config: configPath }, 'fleet config reloaded');
      } catch (err) {
        ctx.logger.error({ err: err instanceof EverdictError ? { code: err.code, message: err.message } : String(err) }, 'fleet config reload refused; keeping the running config');
      }
    });
  },
});
