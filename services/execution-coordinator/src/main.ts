/**
 * The execution-coordinator process (DESIGN §2). Env: DATABASE_URL, AMQP_URL, EVERDICT_CONFIG
 * (required), EVERDICT_CONNECTORS (required: the connectors file, see connectorSet.ts), PORT,
 * LOG_LEVEL; EVERDICT_AMQP_PREFIX (default `everdict`), EVERDICT_DISPATCH_LEASE_MS (default
 * 30000), EVERDICT_DISPATCH_POLL_MS (default 1000); for fault tests only: EVERDICT_CRASHPOINT,
 * EVERDICT_CRASH_LOG (see crashpoints.ts).
 */
import { openSubstrate } from '@everdict/host';
import { ConfigError, envVar, integerParser, loadFleetConfig, parseString, runService } from '@everdict/service-kit';
import { loadConnectors } from './connectorSet.js';
import { crashPointsFromEnv } from './crashpoints.js';
import { COORDINATOR_SERVICE } from './dispatcher.js';
import { startExecutionCoordinator } from './service.js';

await runService({
  name: COORDINATOR_SERVICE,
  extraEnv: {
    amqpPrefix: envVar('EVERDICT_AMQP_PREFIX', parseString, { default: 'everdict' }),
    connectorsPath: envVar('EVERDICT_CONNECTORS', parseString),
    leaseMs: envVar('EVERDICT_DISPATCH_LEASE_MS', integerParser(200, 3_600_000), { default: 30_000 }),
    pollMs: envVar('EVERDICT_DISPATCH_POLL_MS', integerParser(10, 60_000), { default: 1_000 }),
  },
  async start(ctx) {
    const { databaseUrl, amqpUrl, configPath, connectorsPath } = ctx.config;
    const missing = [
      ...(databaseUrl ? [] : [{ name: 'DATABASE_URL', reason: 'is required by a separate coordinator process' }]),
      ...(amqpUrl ? [] : [{ name: 'AMQP_URL', reason: 'is required by a separate coordinator process' }]),
      ...(configPath ? [] : [{ name: 'EVERDICT_CONFIG', reason: 'is required: the fleet config declares connectors and gate policies' }]),
      ...(connectorsPath ? [] : [{ name: 'EVERDICT_CONNECTORS', reason: 'is required: the connectors file defines the reviewed operations' }]),
    ];
    if (missing.length > 0) throw new ConfigError(missing);
    const crash = crashPointsFromEnv();
    const loaded = loadFleetConfig(configPath!);
    const connectors = await loadConnectors(connectorsPath!);
    ctx.onShutdown('connectors', () => connectors.close());
    const substrate = await openSubstrate(ctx, { databaseUrl: databaseUrl!, amqpUrl: amqpUrl!, amqpPrefix: ctx.config.amqpPrefix });
    await startExecutionCoordinator(ctx, substrate, loaded.config, { connectors, crash, leaseMs: ctx.config.leaseMs, pollMs: ctx.config.pollMs });
  },
});
