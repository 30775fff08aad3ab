/**
 * `everdict start [--service NAME …]`: runs a fleet node against DATABASE_URL and AMQP_URL —
 * migrations applied, topology asserted, the outbox relay publishing, /metrics /livez /readyz
 * on PORT, SIGTERM drained — plus the named services (all available ones when none is named).
 */
import type { FleetConfig } from '@everdict/contracts';
import { loadConnectors, startExecutionCoordinator } from '@everdict/execution-coordinator';
import type { ConnectorSet } from '@everdict/execution-coordinator';
import { startGate } from '@everdict/gate';
import { openSubstrate } from '@everdict/host';
import type { Substrate } from '@everdict/host';
import { startReconciler } from '@everdict/reconciler';
import { ConfigError, envVar, loadFleetConfig, parseString, runService } from '@everdict/service-kit';
import type { ServiceContext } from '@everdict/service-kit';

export const FLEET_SERVICES = ['intake', 'turn-worker', 'gate', 'execution-coordinator', 'reconciler'] as const;
export type FleetService = (typeof FLEET_SERVICES)[number];

/** What a service needs beyond the substrate; loaded once per process. */
interface NodeResources {
  fleet(): FleetConfig;
  connectors(): Promise<ConnectorSet>;
}

type ServiceStarter = (ctx: ServiceContext, substrate: Substrate, res: NodeResources) => Promise<void>;

/** Services wired into this build. The others are refused by name rather than silently skipped. */
const AVAILABLE: Partial<Record<FleetService, ServiceStarter>> = {
  gate: async (ctx, substrate, res) => {
    await startGate(ctx, substrate, res.fleet());
  },
  'execution-coordinator': async (ctx, substrate, res) => {
    await startExecutionCoordinator(ctx, substrate, res.fleet(), { connectors: await res.connectors() });
  },
  reconciler: async (ctx, substrate, res) => {
    await startReconciler(ctx, substrate, res.fleet(), { connectors: await res.connectors() });
  },
};

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
    extraEnv: {
      amqpPrefix: envVar('EVERDICT_AMQP_PREFIX', parseString, { default: 'everdict' }),
      connectorsPath: envVar('EVERDICT_CONNECTORS', parseString),
    },
    async start(ctx) {
      const { databaseUrl, amqpUrl } = ctx.config;
      const missing = [
        ...(databaseUrl ? [] : [{ name: 'DATABASE_URL', reason: 'is required (the embedded single-process mode is not available yet)' }]),
        ...(amqpUrl ? [] : [{ name: 'AMQP_URL', reason: 'is required (the embedded single-process mode is not available yet)' }]),
      ];
      if (missing.length) throw new ConfigError(missing);
      const { configPath, connectorsPath } = ctx.config;
      let fleet: FleetConfig | undefined;
      let connectors: Promise<ConnectorSet> | undefined;
      const res: NodeResources = {
        fleet: () => {
          if (!configPath) throw new ConfigError([{ name: 'EVERDICT_CONFIG', reason: 'is required by the selected services (routes, profiles, gate policies, principals)' }]);
          return (fleet ??= loadFleetConfig(configPath).config);
        },
        connectors: () => {
          if (!connectorsPath) throw new ConfigError([{ name: 'EVERDICT_CONNECTORS', reason: 'is required by the execution-coordinator and reconciler (reviewed connector operations)' }]);
          if (!connectors) {
            connectors = loadConnectors(connectorsPath);
            ctx.onShutdown('connectors', async () => (await connectors!).close());
          }
          return connectors;
        },
      };
      const substrate = await openSubstrate(ctx, { databaseUrl: databaseUrl!, amqpUrl: amqpUrl!, amqpPrefix: ctx.config.amqpPrefix });
      for (const s of services) await s.start(ctx, substrate, res);
      ctx.logger.info({ prefix: ctx.config.amqpPrefix, services: services.map((s) => s.name) }, 'fleet node ready');
    },
  });
}
