/**
 * The gate process (DESIGN §2). Env: DATABASE_URL, AMQP_URL, EVERDICT_CONFIG (required: the
 * principals and gate policies), PORT, LOG_LEVEL; EVERDICT_AMQP_PREFIX (broker name prefix,
 * default `everdict`), EVERDICT_GRANT_TTL_MS (default 900000), EVERDICT_GATE_TTL_MS (default
 * 86400000). SIGHUP reloads the fleet config; an invalid file is refused and the running one stays.
 */
import { EverdictError } from '@everdict/contracts';
import { openSubstrate } from '@everdict/host';
import { ConfigError, envVar, integerParser, loadFleetConfig, parseString, runService } from '@everdict/service-kit';
import { DEFAULT_GATE_TTL_MS, DEFAULT_GRANT_TTL_MS, startGate } from './service.js';

await runService({
  name: 'gate',
  extraEnv: {
    amqpPrefix: envVar('EVERDICT_AMQP_PREFIX', parseString, { default: 'everdict' }),
    grantTtlMs: envVar('EVERDICT_GRANT_TTL_MS', integerParser(1, 7 * 24 * 3_600_000), { default: DEFAULT_GRANT_TTL_MS }),
    gateTtlMs: envVar('EVERDICT_GATE_TTL_MS', integerParser(1, 365 * 24 * 3_600_000), { default: DEFAULT_GATE_TTL_MS }),
  },
  async start(ctx) {
    const { databaseUrl, amqpUrl, configPath } = ctx.config;
    const missing = [
      ...(databaseUrl ? [] : [{ name: 'DATABASE_URL', reason: 'is required by a separate gate process' }]),
      ...(amqpUrl ? [] : [{ name: 'AMQP_URL', reason: 'is required by a separate gate process' }]),
      ...(configPath ? [] : [{ name: 'EVERDICT_CONFIG', reason: 'is required: the fleet config declares principals and gate policies' }]),
    ];
    if (missing.length > 0) throw new ConfigError(missing);
    const loaded = loadFleetConfig(configPath!);
    const substrate = await openSubstrate(ctx, { databaseUrl: databaseUrl!, amqpUrl: amqpUrl!, amqpPrefix: ctx.config.amqpPrefix });
    const gate = await startGate(ctx, substrate, loaded.config, { grantTtlMs: ctx.config.grantTtlMs, gateTtlMs: ctx.config.gateTtlMs });
    process.on('SIGHUP', () => {
      try {
        gate.replaceFleet(loadFleetConfig(configPath!).config);
        ctx.logger.info({ config: configPath }, 'fleet config reloaded');
      } catch (err) {
        ctx.logger.error({ err: err instanceof EverdictError ? { code: err.code, message: err.message } : String(err) }, 'fleet config reload refused; keeping the running config');
      }
    });
  },
});
