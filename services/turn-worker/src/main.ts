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
import { EverdictError } from '@everdict/contracts';
import { openSubstrate } from '@everdict/host';
import { ConfigError, envVar, loadFleetConfig, parseString, runService } from '@everdict/service-kit';
import { crashPointsFromEnv } from './crashpoints.js';
import { startTurnWorker } from './service.js';
import { runtimeSettings } from './settings.js';
import { SERVICE } from './worker.js';

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
    const substrate = await openSubstrate(ctx, { databaseUrl: databaseUrl!, amqpUrl: amqpUrl!, amqpPrefix: ctx.config.amqpPrefix, poolSize: runtimeSettings(loaded.config).dbPoolSize });
    const running = await startTurnWorker(ctx, substrate, loaded, {
      crash: crashPointsFromEnv(),
      modelLog: ctx.config.modelLog ?? null,
      ...(ctx.config.workerName ? { workerName: ctx.config.workerName } : {}),
      keepSamples: ctx.config.benchSamples !== undefined,
    });
    if (ctx.config.benchSamples) {
      const file = ctx.config.benchSamples;
      // Written on the way out, once the drain has finished every turn.
      process.once('exit', () => writeFileSync(file, JSON.stringify(running.metrics.samples ?? [])));
    }
    process.on('SIGHUP', () => {
      try {
        running.replaceFleet(loadFleetConfig(configPath!));
        ctx.logger.info({ config: configPath }, 'fleet config reloaded');
      } catch (err) {
        ctx.logger.error({ err: err instanceof EverdictError ? { code: err.code, message: err.message } : String(err) }, 'fleet config reload refused; keeping the running config');
      }
    });
  },
});
