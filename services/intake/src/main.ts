/**
 * The intake process (DESIGN §2). Env: DATABASE_URL, AMQP_URL, EVERDICT_CONFIG (required: case
 * types and principals), PORT, LOG_LEVEL; EVERDICT_AMQP_PREFIX (broker name prefix, default
 * `everdict`), EVERDICT_INTAKE_SOURCES (optional JSON file of webhook sources and mailboxes;
 * secrets are named by environment variable, see sources.ts). SIGHUP reloads the fleet config;
 * an invalid file is refused and the running one stays.
 */
import { EverdictError } from '@everdict/contracts';
import { openSubstrate } from '@everdict/host';
import { ConfigError, envVar, loadFleetConfig, parseString, runService } from '@everdict/service-kit';
import { startIntake } from './service.js';
import { loadIntakeSources } from './sources.js';

await runService({
  name: 'intake',
  extraEnv: {
    amqpPrefix: envVar('EVERDICT_AMQP_PREFIX', parseString, { default: 'everdict' }),
    sourcesPath: envVar('EVERDICT_INTAKE_SOURCES', parseString),
  },
  async start(ctx) {
    const { databaseUrl, amqpUrl, configPath, sourcesPath } = ctx.config;
    const missing = [
      ...(databaseUrl ? [] : [{ name: 'DATABASE_URL', reason: 'is required by a separate intake process' }]),
      ...(amqpUrl ? [] : [{ name: 'AMQP_URL', reason: 'is required by a separate intake process' }]),
      ...(configPath ? [] : [{ name: 'EVERDICT_CONFIG', reason: 'is required: the fleet config declares case types and principals' }]),
    ];
    if (missing.length > 0) throw new ConfigError(missing);
    const loaded = loadFleetConfig(configPath!);
    const sources = sourcesPath ? loadIntakeSources(sourcesPath) : undefined;
    const substrate = await openSubstrate(ctx, { databaseUrl: databaseUrl!, amqpUrl: amqpUrl!, amqpPrefix: ctx.config.amqpPrefix });
    const intake = await startIntake(ctx, substrate, loaded.config, { ...(sources ? { sources } : {}), databaseUrl: databaseUrl!, amqpUrl: amqpUrl! });
    process.on('SIGHUP', () => {
      try {
        intake.replaceFleet(loadFleetConfig(configPath!).config);
        ctx.logger.info({ config: configPath }, 'fleet config reloaded');
      } catch (err) {
        ctx.logger.error({ err: err instanceof EverdictError ? { code: err.code, message: err.message } : String(err) }, 'fleet config reload refused; keeping the running config');
      }
    });
  },
});
