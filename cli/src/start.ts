/**
 * `everdict start [--service NAME …]`: one node of the fleet.
 *
 * Fleet mode (DATABASE_URL and AMQP_URL both set): migrations applied, topology asserted, the
 * outbox relay publishing, /metrics /livez /readyz on PORT, SIGTERM drained — plus the named
 * services (all available ones whose configuration is present when none is named).
 *
 * Embedded mode (neither set, see embedded.ts): all five services in this one process on a
 * file-backed PGlite database and the in-process transport, with the sample fleet config and
 * the demo notebook by default; it prints how to open a demo case and decide its gate. The
 * services are the same start functions on the same kind of substrate: same handlers, same
 * inbox dedup, same fencing. One URL without the other is a ConfigError naming the missing one.
 */
import type { FleetConfig } from '@everdict/contracts';
import { loadConnectors, openConnectors, startExecutionCoordinator } from '@everdict/execution-coordinator';
import type { ConnectorSet, ConnectorsFile } from '@everdict/execution-coordinator';
import { startGate } from '@everdict/gate';
import { loadIntakeSources, startIntake } from '@everdict/intake';
import { openEmbeddedSubstrate, openSubstrate } from '@everdict/host';
import type { Substrate } from '@everdict/host';
import { startReconciler } from '@everdict/reconciler';
import { ConfigError, envVar, loadFleetConfig, parseString, runService } from '@everdict/service-kit';
import type { LoadedFleetConfig, ServiceContext } from '@everdict/service-kit';
import { startTurnWorker } from '@everdict/turn-worker';
import { demoConnectorsFile, demoNotesRoutes } from './demoNotes.js';
import { embeddedBanner, embeddedPort, embeddedSettings, nodeMode } from './embedded.js';
import type { EmbeddedSettings } from './embedded.js';

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

/** Loads the fleet config and the connectors once per process, when a service first asks. */
function nodeResources(ctx: ServiceContext, configPath: string | undefined, connectors: () => Promise<ConnectorSet>): NodeResources {
  let loaded: LoadedFleetConfig | undefined;
  let opened: Promise<ConnectorSet> | undefined;
  const res: NodeResources = {
    loaded: () => {
      if (!configPath) throw new ConfigError([{ name: 'EVERDICT_CONFIG', reason: 'is required by the selected services (routes, profiles, gate policies, principals)' }]);
      return (loaded ??= loadFleetConfig(configPath));
    },
    fleet: () => res.loaded().config,
    connectors: () => {
      if (!opened) {
        opened = connectors();
        ctx.onShutdown('connectors', async () => (await opened!).close());
      }
      return opened;
    },
  };
  return res;
}

export async function runStart(requested: readonly string[] = []): Promise<void> {
  const env = process.env;
  if (nodeMode(env) === 'embedded') return runEmbedded(requested, env);
  const { services, skipped } = selectServices(requested, env);
  await runService({
    name: services.length === 1 ? services[0]!.name : 'everdict',
    extraEnv: {
      amqpPrefix: envVar('EVERDICT_AMQP_PREFIX', parseString, { default: 'everdict' }),
      connectorsPath: envVar('EVERDICT_CONNECTORS', parseString),
      demoNotesDir: envVar('EVERDICT_DEMO_NOTES_DIR', parseString),
    },
    async start(ctx) {
      const { databaseUrl, amqpUrl, configPath, connectorsPath, demoNotesDir } = ctx.config;
      // The demo notebook (the sample `notes` connector's target) served next to intake, so the
      // compose stack can run the demo case end to end. Demo only: it has no authentication.
      if (demoNotesDir && services.some((s) => s.name === 'intake')) ctx.addRoutes(demoNotesRoutes(demoNotesDir));
      // nodeMode saw both set; the parsed config agrees unless a value was malformed (reported already).
      const res = nodeResources(ctx, configPath, () => {
        if (!connectorsPath) throw new ConfigError([{ name: 'EVERDICT_CONNECTORS', reason: 'is required by the execution-coordinator and reconciler (reviewed connector operations)' }]);
        return loadConnectors(connectorsPath);
      });
      const substrate = await openSubstrate(ctx, { databaseUrl: databaseUrl!, amqpUrl: amqpUrl!, amqpPrefix: ctx.config.amqpPrefix });
      for (const s of services) await s.start(ctx, substrate, res);
      for (const s of skipped) ctx.logger.warn({ service: s.name, missing: s.missing }, 'service not started: configuration missing');
      ctx.logger.info({ mode: 'fleet', prefix: ctx.config.amqpPrefix, services: services.map((s) => s.name) }, 'fleet node ready');
    },
  });
}

/**
 * Embedded mode: every service, in FLEET_SERVICES order, on one embedded substrate; the relay
 * starts only after all of them subscribed (host/embedded.ts says why).
 */
async function runEmbedded(requested: readonly string[], env: NodeJS.ProcessEnv): Promise<void> {
  if (requested.length > 0) {
    throw new ConfigError([{ name: '--service', reason: 'embedded mode runs all five services in one process; set DATABASE_URL and AMQP_URL to run a subset' }]);
  }
  const services = FLEET_SERVICES.map((name) => ({ name, start: AVAILABLE[name]! }));
  const port = await embeddedPort(env);
  let settings: EmbeddedSettings | undefined;
  const running = await runService({
    name: 'everdict',
    ...(port === undefined ? {} : { port }),
    extraEnv: {
      amqpPrefix: envVar('EVERDICT_AMQP_PREFIX', parseString, { default: 'everdict' }),
      connectorsPath: envVar('EVERDICT_CONNECTORS', parseString),
      dataDir: envVar('EVERDICT_DATA_DIR', parseString),
    },
    async start(ctx) {
      const s = (settings = embeddedSettings(ctx.config));
      const substrate = await openEmbeddedSubstrate(ctx, { dataDir: s.dataDir, amqpPrefix: ctx.config.amqpPrefix });
      const demo = s.connectorsPath === undefined;
      if (demo) ctx.addRoutes(demoNotesRoutes(s.dataDir));
      const res = nodeResources(ctx, s.configPath, () => (demo ? openConnectors(demoConnectorsFile(port ?? ctx.config.port) as ConnectorsFile) : loadConnectors(s.connectorsPath!)));
      for (const svc of services) await svc.start(ctx, substrate, res);
      await substrate.startRelay();
      ctx.logger.info({ mode: 'embedded', dataDir: s.dataDir, config: s.configPath, demoConnectors: demo, services: services.map((x) => x.name) }, 'fleet node ready');
    },
  });
  process.stdout.write(`${embeddedBanner({ port: running.port, settings: settings!, services: services.map((x) => x.name) })}\n`);
}
