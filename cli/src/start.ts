/**
 * `everdict start [--service NAME …]`: runs a fleet node against DATABASE_URL and AMQP_URL —
 * migrations applied, topology asserted, the outbox relay publishing, /metrics /livez /readyz
 * on PORT, SIGTERM drained — plus the named services (all available ones when none is named).
 */
import { openSubstrate } from '@everdict/host';
import type { Substrate } from '@everdict/host';
import { ConfigError, envVar, parseString, runService } from '@everdict/service-kit';
import type { ServiceContext } from '@everdict/service-kit';

export const FLEET_SERVICES = ['intake', 'turn-worker', 'gate', 'execution-coordinator', 'reconciler'] as const;
export type FleetService = (typeof FLEET_SERVICES)[number];

type ServiceStarter = (ctx: ServiceContext, substrate: Substrate) => Promise<void>;

/** Services wired into this build. The others are refused by name rather than silently skipped. */
const AVAILABLE: Partial<Record<FleetService, ServiceStarter>> = {};

export function selectServices(requested: readonly string[]): { name: FleetService; start: ServiceStarter }[] {
  const problems: { name: string; reason: string }[] = [];
  const names = requested.length ? requested : FLEET_SERVICES.filter((s) => AVAILABLE[s]);
  const selected: { name: FleetService; start: ServiceStarter }[] = [];
  for (const name of names) {
    if (!(FLEET_SERVICES as readonly string[]).includes(name)) {
      problems.push({ name: '--service', reason: `unknown service "${name}"; one of ${FLEET_SERVICES.join(', ')}` });
      continue;
    }
    const start = AVAILABLE[name as FleetService];
    if (!start) problems.push({ name: '--service', reason: `service "${name}" is not available in this build yet` });
    else selected.push({ name: name as FleetService, start });
  }
  if (problems.length) throw new ConfigError(problems);
  return selected;
}

export async function runStart(requested: readonly string[] = []): Promise<void> {
  const services = selectServices(requested);
  await runService({
    name: services.length === 1 ? services[0]!.name : 'everdict',
    extraEnv: { amqpPrefix: envVar('EVERDICT_AMQP_PREFIX', parseString, { default: 'everdict' }) },
    async start(ctx) {
      const { databaseUrl, amqpUrl } = ctx.config;
      const missing = [
        ...(databaseUrl ? [] : [{ name: 'DATABASE_URL', reason: 'is required (the embedded single-process mode is not available yet)' }]),
        ...(amqpUrl ? [] : [{ name: 'AMQP_URL', reason: 'is required (the embedded single-process mode is not available yet)' }]),
      ];
      if (missing.length) throw new ConfigError(missing);
      const substrate = await openSubstrate(ctx, { databaseUrl: databaseUrl!, amqpUrl: amqpUrl!, amqpPrefix: ctx.config.amqpPrefix });
      for (const s of services) await s.start(ctx, substrate);
      ctx.logger.info({ prefix: ctx.config.amqpPrefix, services: services.map((s) => s.name) }, 'fleet node ready');
    },
  });
}
