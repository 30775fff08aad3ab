/**
 * `everdict start [--service NAME …]`: runs a fleet node against DATABASE_URL and AMQP_URL —
 * migrations applied, topology asserted, the outbox relay publishing, /metrics /livez /readyz
 * on PORT, SIGTERM drained — plus the named services (all available ones when none is named).
 */
import type { FleetConfig } from '@everdict/contracts';
import { loadConnectors, startExecutionCoordinator } from '@everdict/execution-coordinator';
import type { ConnectorSet } from '@everdict/execution-coordinator';
import { startGate } from '@everdict/gate';
import { loadIntakeSources, startIntake } from '@everdict/intake';
import { openSubstrate } from '@everdict/host';
import type { Substrate } from '@everdict/host';
import { startReconciler } from '@everdict/reconciler';
import { ConfigError, envVar, loadFleetConfig, parseString, runService } from '@everdict/service-kit';
import type { LoadedFleetConfig, ServiceContext } from '@everdict/service-kit';
import { startTurnWorker } from '@everdict/turn-worker';

export const FLEET_SERVICES = ['intake', 'turn-worker', 'gate', 'execution-coordinator', 'reconciler'] as const;
export type FleetService = (typeof FLEET_SERVICES)[number];

/** What a service needs beyond the substrate; loaded once per process. */
interface NodeResources {
  loaded(): LoadedFleetConfig;
  fleet(): FleetConfig;
  connectors(): Promise<ConnectorSet>;
}

type ServiceStarter = (ctx: ServiceContext, substrate: Substrate, res: NodeResources) => Promise<void>;

/** Services wired into this build. The others are refused by name rather than silently skipped. */
const AVAILABLE: Partial<Record<FleetService, ServiceStarter>> = {
  intake: async (ctx, substrate, res) => {
    const sourcesPath = process.env['EVERDICT_INTAKE_SOURCES'];
    await startIntake(ctx, substrate, res.fleet(), {
      ...(sourcesPath ? { sources: loadIntakeSources(sourcesPath) } : {}),
      ...(ctx.config.databaseUrl ? { databaseUrl: ctx.config.databaseUrl } : {}),
      ...(ctx.config.amqpUrl ? { amqpUrl: ctx.config.amqpUrl } : {}),
    });
  },
  'turn-worker': async (ctx, substrate, res) => {
    await startTurnWorker(ctx, substrate, res.loaded());
  },
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

/** What each service needs from the environment beyond DATABASE_URL and AMQP_URL. */
const NEEDS: Record<FleetService, readonly ('EVERDICT_CONFIG' | 'EVERDICT_CONNECTORS')[]> = {
  intake: ['EVERDICT_CONFIG'],
  'turn-worker': ['EVERDICT_CONFIG'],
  gate: ['EVERDICT_CONFIG'],
  'execution-coordinator': ['EVERDICT_CONFIG', 'EVERDICT_CONNECTORS'],
  reconciler: ['EVERDICT_CONFIG', 'EVERDICT_CONNECTORS'],
};

export interface Selection {
  services: { name: FleetService; start: ServiceStarter }[];
  /** Services left out of an implicit selection, and why (logged at start). */
  skipped: { name: FleetService; missing: string[] }[];
}

/**
 * Named services are strict: an unknown or unavailable one is an error. With none named, every
 * available service whose configuration is present runs; the rest are reported as skipped.
 */
export function selectServices(requested: readonly string[], env: Readonly<Record<string, string | undefined>> = {}): Selection {
  const problems: { name: string; reason: string }[] = [];
  const services: Selection['services'] = [];
  const skipped: Selection['skipped'] = [];
  if (requested.length === 0) {
    for (const name of FLEET_SERVICES) {
      const start = AVAILABLE[name];
      if (!start) continue;
      const missing = NEEDS[name].filter((v) => !env[v]);
      if (missing.length) skipped.push({ name, missing });
      else services.push({ name, start });
    }
    return { services, skipped };
  }
  for (const name of requested) {
    if (!(FLEET_SERVICES as readonly string[]).includes(name)) {
      problems.push({ name: '--service', reason: `unknown service "${name}"; one of ${FLEET_SERVICES.join(', ')}` });
      continue;
    }
    const start = AVAILABLE[name as FleetService];
    if (!start) problems.push({ name: '--service', reason: `service "${name}" is not available in this build yet` });
    else services.push({ name: name as FleetService, start });
  }
  if (problems.length) throw new ConfigError(problems);
  return { services, skipped };
}

export async function runStart(requested: readonly string[] = []): Promise<void> {
  const { services, skipped } = selectServices(requested, process.env);
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
      let loaded: LoadedFleetConfig | undefined;
      let connectors: Promise<ConnectorSet> | undefined;
      const res: NodeResources = {
        loaded: () => {
          if (!configPath) throw new ConfigError([{ name: 'EVERDICT_CONFIG', reason: 'is required by the selected services (routes, profiles, gate policies, principals)' }]);
          return (loaded ??= loadFleetConfig(configPath));
        },
        fleet: () => res.loaded().config,
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
      for (const s of skipped) ctx.logger.warn({ service: s.name, missing: s.missing }, 'service not started: configuration missing');
      ctx.logger.info({ prefix: ctx.config.amqpPrefix, services: services.map((s) => s.name) }, 'fleet node ready');
    },
  });
}
