/**
 * `everdict start [--service NAME]…`: the one composition root of every Everdict process —
 * compose's containers, the embedded node, the test fleets and the benchmarks all start here.
 *
 * Order (each step only once the previous one stood):
 *   1. SIGHUP is answered from the first instant (a HUP must never kill a node);
 *   2. the plan: environment, files, selection, crash points, topology — all validated, all
 *      problems reported together (node/plan.ts); nothing has been touched yet;
 *   3. health/metrics server on PORT (/readyz `starting`), then the substrate: Postgres
 *      (migrated), the transport with the topology asserted, the outbox relay;
 *   4. the services in FLEET_SERVICES order; embedded mode starts its relay after all of them
 *      subscribed (host/embedded.ts says why);
 *   5. ready. SIGTERM/SIGINT drain in reverse; SIGHUP reloads the fleet config (node/reload.ts).
 *
 * Fleet mode: DATABASE_URL and AMQP_URL both set; with no --service, every service whose
 * configuration is present runs (the others are logged as skipped; none at all is refused).
 * Embedded mode: neither set; all five services in this one process on file-backed PGlite and
 * the in-process transport, the sample config and the demo notebook unless told otherwise.
 */
import { openEmbeddedSubstrate, openSubstrate } from '@everdict/host';
import type { Substrate } from '@everdict/host';
import { runService } from '@everdict/service-kit';
import type { LoadedFleetConfig, ServiceContext } from '@everdict/service-kit';
import { demoNotesRoutes } from './demoNotes.js';
import { embeddedBanner, embeddedPort, nodeMode } from './embedded.js';
import { NODE_ENV, planNode } from './node/plan.js';
import type { NodePlan } from './node/plan.js';
import { fleetReloader } from './node/reload.js';
import type { NodeInputs, StartedService } from './node/services.js';


/** Until the node is running, a SIGHUP is logged to stderr and otherwise ignored. */
let onHangup: () => void = () => process.stderr.write('everdict: SIGHUP during start-up ignored; send it again once the node is ready\n');
process.on('SIGHUP', () => onHangup());

export async function runStart(requested: readonly string[] = []): Promise<void> {
  const env = process.env;
  // The embedded node's demo notebook URL must know the port it binds, so a PORT=0 is chosen first.
  let port: number | undefined;
  try {
    port = nodeMode(env) === 'embedded' ? await embeddedPort(env) : undefined;
  } catch {
    port = undefined; // the plan reports the mode problem with every other one
  }
  const plan = await planNode(requested, env, { port });
  // Secrets read from X_FILE files become X for every later reader of the environment.
  Object.assign(process.env, plan.secretsFromFiles);
  const names = plan.services.map((s) => s.def.name);

  let banner: (() => string) | undefined;
  const running = await runService({
    name: plan.mode === 'fleet' && names.length === 1 ? names[0]! : 'everdict',
    // The spans' service.name: which services this process runs (a fleet node may run several).
    traceName: plan.mode === 'fleet' ? names.join('+') : 'everdict',
    ...(port === undefined ? {} : { port }),
    extraEnv: NODE_ENV,
    async start(ctx) {
      const { substrate, afterServices } = await openNodeSubstrate(ctx, plan);
      if (plan.connectors) {
        const connectors = plan.connectors;
        ctx.onShutdown('connectors', () => connectors.close());
      }
      const inputs = nodeInputs(plan);
      const started: StartedService[] = [];
      for (const s of plan.services) started.push(await s.module.start(ctx, substrate, inputs, s.values, s.prepared));
      await afterServices();

      const reload = fleetReloader({
        path: plan.loaded.path!,
        running: plan.loaded.config,
        // Without connectors, a config whose profiles read is one this node cannot run.
        ...(plan.connectors ? {} : { unmet: (next: LoadedFleetConfig) => connectorReadsUnmet(plan, next) }),
        logger: ctx.logger,
        counter: ctx.metrics.config.reloads,
        apply: (next: LoadedFleetConfig) => {
          for (const s of started) s.replaceFleet?.(next);
        },
      });
      onHangup = () => void reload();

      for (const s of plan.skipped) ctx.logger.warn({ service: s.name, missing: s.missing }, 'service not started: configuration missing');
      ctx.logger.info({ mode: plan.mode, prefix: plan.values.amqpPrefix, services: names, ...(plan.embedded ? { dataDir: plan.embedded.dataDir, config: plan.embedded.configPath, demoConnectors: plan.demoNotes } : {}) }, 'fleet node ready');
      if (plan.embedded) {
        const settings = plan.embedded;
        banner = () => embeddedBanner({ port: running.port, settings, services: names });
      }
    },
  });
  if (banner) process.stdout.write(`${banner()}\n`);
}

/** The node's substrate, and what must run once every service has subscribed. */
async function openNodeSubstrate(ctx: ServiceContext<typeof NODE_ENV>, plan: NodePlan): Promise<{ substrate: Substrate; afterServices: () => Promise<void> }> {
  if (plan.embedded) {
    const dataDir = plan.embedded.dataDir;
    const substrate = await openEmbeddedSubstrate(ctx, { dataDir, topology: plan.topology });
    // The demo notebook is the demo connector's target; it keeps its notes beside the database.
    if (plan.demoNotes) ctx.addRoutes(demoNotesRoutes(dataDir));
    return { substrate, afterServices: () => substrate.startRelay() };
  }
  const { databaseUrl, amqpUrl, demoNotesDir } = plan.values;
  // Demo only (no authentication): the notebook the sample `notes` connector writes to, served
  // next to intake so the compose stack can run the demo case end to end.
  if (demoNotesDir && plan.services.some((s) => s.def.name === 'intake')) ctx.addRoutes(demoNotesRoutes(demoNotesDir));
  const substrate = await openSubstrate(ctx, { databaseUrl: databaseUrl!, amqpUrl: amqpUrl!, topology: plan.topology, poolSize: plan.poolSize, migrateOnStart: plan.values.migrateOnStart, ...(plan.amqpTls ? { amqpTls: plan.amqpTls } : {}), ...(plan.brokerLogin ? { brokerLogin: plan.brokerLogin } : {}) });
  return { substrate, afterServices: () => Promise.resolve() };
}

function nodeInputs(plan: NodePlan): NodeInputs {
  return {
    loaded: plan.loaded,
    connectors: () => {
      if (!plan.connectors) throw new Error('connectors were not opened for this node'); // the plan opens them for every service that needs them
      return Promise.resolve(plan.connectors);
    },
    openedConnectors: plan.connectors,
    crash: plan.crash,
    databaseUrl: plan.values.databaseUrl,
    amqpUrl: plan.values.amqpUrl,
  };
}

/** What in `next` needs the connectors this node runs without (empty: nothing). */
function connectorReadsUnmet(plan: NodePlan, next: LoadedFleetConfig): { path: string; message: string }[] {
  return plan.services.flatMap((s) => {
    const path = s.def.connectorsFor?.(next.config);
    return path === undefined ? [] : [{ path, message: `lists connector reads, which ${s.def.name} on this node cannot call: it opened no connectors at start (restart the node)` }];
  });
}
