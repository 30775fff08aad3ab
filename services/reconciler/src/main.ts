/**
 * The reconciler process (DESIGN §2). Env: DATABASE_URL, AMQP_URL, EVERDICT_CONFIG (required),
 * EVERDICT_CONNECTORS (required: WhatLanded asks the same connectors), PORT, LOG_LEVEL;
 * EVERDICT_AMQP_PREFIX (default `everdict`), EVERDICT_RECONCILE_INTERVAL_MS (default 1000),
 * EVERDICT_RECONCILE_BACKOFF_MS (first recheck delay, default 1000; doubles to
 * EVERDICT_RECONCILE_BACKOFF_MAX_MS, default 300000), EVERDICT_RECONCILE_LEASE_MS (default 30000).
 */
import { openSubstrate } from '@everdict/host';
import { ConfigError, envVar, integerParser, loadFleetConfig, parseString, runService } from '@everdict/service-kit';
import { loadConnectors } from '../../execution-coordinator/src/connectorSet.js';
import { startReconciler } from './service.js';
import { RECONCILER_SERVICE } from './sweeps.js';

await runService({
  name: RECONCILER_SERVICE,
  extraEnv: {
    amqpPrefix: envVar('EVERDICT_AMQP_PREFIX', parseString, { default: 'everdict' }),
    connectorsPath: envVar('EVERDICT_CONNECTORS', parseString),
    intervalMs: envVar('EVERDICT_RECONCILE_INTERVAL_MS', integerParser(20, 3_600_000), { default: 1_000 }),
    backoffMs: envVar('EVERDICT_RECONCILE_BACKOFF_MS', integerParser(10, 3_600_000), { default: 1_000 }),
    backoffMaxMs: envVar('EVERDICT_RECONCILE_BACKOFF_MAX_MS', integerParser(10, 24 * 3_600_000), { default: 300_000 }),
    leaseMs: envVar('EVERDICT_RECONCILE_LEASE_MS', integerParser(200, 3_600_000), { default: 30_000 }),
  },
  async start(ctx) {
    const { databaseUrl, amqpUrl, configPath, connectorsPath } = ctx.config;
    const missing = [
      ...(databaseUrl ? [] : [{ name: 'DATABASE_URL', reason: 'is required by a separate reconciler process' }]),
      ...(amqpUrl ? [] : [{ name: 'AMQP_URL', reason: 'is required by a separate reconciler process' }]),
      ...(configPath ? [] : [{ name: 'EVERDICT_CONFIG', reason: 'is required' }]),
      ...(connectorsPath ? [] : [{ name: 'EVERDICT_CONNECTORS', reason: 'is required: WhatLanded asks the connectors' }]),
    ];
    if (missing.length > 0) throw new ConfigError(missing);
    const loaded = loadFleetConfig(configPath!);
    const connectors = await loadConnectors(connectorsPath!);
    ctx.onShutdown('connectors', () => connectors.close());
    const substrate = await openSubstrate(ctx, { databaseUrl: databaseUrl!, amqpUrl: amqpUrl!, amqpPrefix: ctx.config.amqpPrefix });
    await startReconciler(ctx, substrate, loaded.config, {
      connectors,
      intervalMs: ctx.config.intervalMs,
      backoff: { initialMs: ctx.config.backoffMs, maxMs: Math.max(ctx.config.backoffMs, ctx.config.backoffMaxMs) },
      leaseMs: ctx.config.leaseMs,
    });
  },
});
