/**
 * `everdict start`: runs a fleet node against DATABASE_URL and AMQP_URL — migrations applied,
 * topology asserted, the outbox relay publishing, /metrics /livez /readyz on PORT, SIGTERM
 * drained. Services join this process as they are built (see DESIGN §2).
 */
import { openSubstrate } from '@everdict/host';
import { ConfigError, envVar, parseString, runService } from '@everdict/service-kit';

export async function runStart(): Promise<void> {
  await runService({
    name: 'everdict',
    extraEnv: { amqpPrefix: envVar('EVERDICT_AMQP_PREFIX', parseString, { default: 'everdict' }) },
    async start(ctx) {
      const { databaseUrl, amqpUrl } = ctx.config;
      const missing = [
        ...(databaseUrl ? [] : [{ name: 'DATABASE_URL', reason: 'is required (the embedded single-process mode is not available yet)' }]),
        ...(amqpUrl ? [] : [{ name: 'AMQP_URL', reason: 'is required (the embedded single-process mode is not available yet)' }]),
      ];
      if (missing.length) throw new ConfigError(missing);
      await openSubstrate(ctx, { databaseUrl: databaseUrl!, amqpUrl: amqpUrl!, amqpPrefix: ctx.config.amqpPrefix });
      ctx.logger.info({ prefix: ctx.config.amqpPrefix }, 'fleet node ready');
    },
  });
}
