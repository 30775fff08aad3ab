/**
 * `planNode`: everything `everdict start` needs, validated BEFORE anything is touched — no
 * database connection, no migration, no broker declaration, no relay happens until the plan
 * stands. Every problem of the environment and of the files it names (fleet config and the
 * variables its connectors name, intake sources, crash points, broker definitions, the service
 * selection itself) is
 * gathered into ONE `ConfigError`, each entry naming its variable (and JSON path), so an
 * operator fixes the whole configuration in one round trip.
 */
import { EverdictError } from '@everdict/contracts';
import { amqpPasswordEnv, brokerLogin, loadTopology } from '@everdict/bus';
import type { BrokerLogin, Topology } from '@everdict/bus';
import { connectorEnvNames, connectorEnvProblems, openConnectors } from '@everdict/connectors';
import type { ConnectorSet } from '@everdict/connectors';
import { BASE_ENV, ConfigError, FleetConfigError, SECRET_VARIABLES, amqpTlsOptions, collectEnv, crash, envVar, loadFleetConfig, parseBoolean, parseString, pgUrlWithTls, resolveSecretFiles } from '@everdict/service-kit';
import type { AmqpTlsOptions, ConfigProblem, EnvSpec, EnvValues, LoadedFleetConfig } from '@everdict/service-kit';
import { DEMO_NOTES_URL_ENV, demoNotesUrl } from '../demoNotes.js';
import { embeddedSettings, nodeMode } from '../embedded.js';
import type { EmbeddedSettings } from '../embedded.js';
import { FLEET_SERVICES, SERVICE_DEFS } from './services.js';
import type { FleetService, Requirement, ServiceDef, ServiceModule } from './services.js';

type Env = Readonly<Record<string, string | undefined>>;

/** Variables of the node itself, whatever services it runs. */
export const NODE_ENV = {
  /** EVERDICT_AMQP_PREFIX: broker name prefix (default `everdict`); side-by-side fleets and tests use their own. */
  amqpPrefix: envVar('EVERDICT_AMQP_PREFIX', parseString, { default: 'everdict' }),
  /** EVERDICT_DEMO_NOTES_DIR: fleet mode, a node running intake serves the demo notebook from this folder. */
  demoNotesDir: envVar('EVERDICT_DEMO_NOTES_DIR', parseString),
  /** EVERDICT_DATA_DIR: embedded database folder (embedded mode only). */
  dataDir: envVar('EVERDICT_DATA_DIR', parseString),
  /** EVERDICT_CRASHPOINT: `point:n[,…]` — fault tests only: SIGKILL at the n-th arrival at point. */
  crashSpec: envVar('EVERDICT_CRASHPOINT', parseString),
  /** EVERDICT_CRASH_LOG: fault tests only: a JSON line per injected kill. */
  crashLog: envVar('EVERDICT_CRASH_LOG', parseString),
  /**
   * EVERDICT_MIGRATE_ON_START: fleet mode, apply pending migrations at start when the role may
   * (default true, for development); false — as compose sets it — only checks the schema and
   * stays not-ready until `everdict migrate` ran. The embedded node always migrates.
   */
  migrateOnStart: envVar('EVERDICT_MIGRATE_ON_START', parseBoolean, { default: true }),
} satisfies EnvSpec;

export type NodeValues = EnvValues<typeof NODE_ENV> & EnvValues<typeof BASE_ENV>;

export interface PlannedService {
  readonly def: ServiceDef;
  readonly module: ServiceModule;
  readonly values: Record<string, unknown>;
  /** What the service's `prepare` read from its files. */
  readonly prepared: unknown;
}

export interface NodePlan {
  readonly mode: 'fleet' | 'embedded';
  readonly services: readonly PlannedService[];
  /** Services an implicit selection left out, and the variables they lacked. */
  readonly skipped: readonly { name: FleetService; missing: Requirement[] }[];
  readonly values: NodeValues;
  readonly loaded: LoadedFleetConfig;
  /** Opened from the fleet config's `connectors` when a service of the node uses them. */
  readonly connectors: ConnectorSet | undefined;
  readonly crash: crash.CrashPoints<string>;
  readonly topology: Topology;
  /**
   * Postgres pool size: the largest any of the node's services wants — runtime.dbPoolSize
   * (default 4) for the turn-worker, whose hot path is group-committed over two connections; 10
   * for the others (claims, API reads and sweeps run side by side).
   */
  readonly poolSize: number;
  /** Embedded mode: the data folder and config in use. */
  readonly embedded: EmbeddedSettings | undefined;
  /**
   * Embedded mode: the node serves the demo notebook, because the config names
   * EVERDICT_DEMO_NOTES_URL and the node sets it to its own address.
   */
  readonly demoNotes: boolean;
  /**
   * Secrets read from `X_FILE` files (variable → value). The composition root exports them to
   * `process.env` so readers that look a variable up later (model routes, MCP servers) see them.
   */
  readonly secretsFromFiles: Readonly<Record<string, string>>;
  /** Fleet mode: how each service of the node logs in to the broker (shared or per service). */
  readonly brokerLogin: BrokerLogin | undefined;
  /** Fleet mode: the broker TLS files named by AMQP_TLS_*_PATH, read (service-kit tls.ts). */
  readonly amqpTls: AmqpTlsOptions | undefined;
}

/** Variables the fleet config names as secrets: routes' API keys and connectors' variables. */
function configSecretNames(loaded: LoadedFleetConfig): string[] {
  const routes = Object.values(loaded.config.routes).flatMap((r) => (r?.apiKeyEnv === undefined ? [] : [r.apiKeyEnv]));
  return [...routes, ...connectorEnvNames(loaded.config.connectors).map((n) => n.variable)];
}

const WHY: Record<Requirement, string> = {
  EVERDICT_CONFIG: 'the fleet config (routes, profiles, case types, principals, gate policies, connectors)',
};

/**
 * Which services run. Named services are strict: an unknown name, or a named service whose
 * requirement is missing, is a problem. With none named, every service whose requirements are
 * present runs and the rest are reported as skipped — and a node left with nothing to run is a
 * problem, never a process that answers /readyz while doing nothing.
 */
export function selectServices(requested: readonly string[], has: (r: Requirement) => boolean, mode: 'fleet' | 'embedded' = 'fleet'): { services: ServiceDef[]; skipped: { name: FleetService; missing: Requirement[] }[]; problems: ConfigProblem[] } {
  const problems: ConfigProblem[] = [];
  const services: ServiceDef[] = [];
  const skipped: { name: FleetService; missing: Requirement[] }[] = [];
  if (mode === 'embedded' && requested.length > 0) {
    problems.push({ name: '--service', reason: 'embedded mode runs all five services in one process; set DATABASE_URL and AMQP_URL to run a subset' });
    return { services, skipped, problems };
  }
  if (requested.length === 0) {
    for (const name of FLEET_SERVICES) {
      const def = SERVICE_DEFS[name];
      const missing = def.needs.filter((r) => !has(r));
      if (missing.length) skipped.push({ name, missing });
      else services.push(def);
    }
    if (services.length === 0) {
      const lacking = [...new Set(skipped.flatMap((s) => s.missing))];
      problems.push({ name: '--service', reason: `no service can run on this node: every service needs ${lacking.join(' and ')} (${lacking.map((r) => WHY[r]).join('; ')}); set them, or name the services with --service` });
    }
    return { services, skipped, problems };
  }
  for (const name of requested) {
    if (!(FLEET_SERVICES as readonly string[]).includes(name)) {
      problems.push({ name: '--service', reason: `unknown service "${name}"; one of ${FLEET_SERVICES.join(', ')}` });
      continue;
    }
    const def = SERVICE_DEFS[name as FleetService];
    if (services.includes(def)) continue;
    services.push(def);
    for (const r of def.needs.filter((x) => !has(x))) problems.push({ name: r, reason: `is required by ${name}: ${WHY[r]}` });
  }
  return { services, skipped, problems };
}

/** A typed failure of a file-backed input, as one problem entry naming its variable. */
function fileProblems(variable: string, err: unknown): ConfigProblem[] {
  if (err instanceof FleetConfigError) return err.problems.map((p) => ({ name: variable, reason: `${p.path || '/'} ${p.message}` }));
  if (err instanceof ConfigError) return [...err.fields];
  if (err instanceof EverdictError) {
    const path = (err.details?.['path'] as string | undefined) ?? '';
    return [{ name: variable, reason: path && !err.message.includes(path) ? `${path} ${err.message}` : err.message }];
  }
  return [{ name: variable, reason: err instanceof Error ? err.message : String(err) }];
}

/**
 * The plan for `everdict start [--service NAME]…` under `env`. `port` is the embedded node's
 * bound port (EVERDICT_DEMO_NOTES_URL, unless set, aims at the notebook it serves).
 * @throws ConfigError listing every problem found.
 */
export async function planNode(requested: readonly string[], rawEnv: Env, opts: { port?: number | undefined } = {}): Promise<NodePlan> {
  const problems: ConfigProblem[] = [];
  // Secrets may come from files (X_FILE); resolved before anything reads them.
  const secretsFromFiles: Record<string, string> = {};
  let env = resolveSecretFiles(rawEnv, SECRET_VARIABLES, problems, { fromFiles: secretsFromFiles });
  let mode: 'fleet' | 'embedded' = 'fleet';
  try {
    mode = nodeMode(env);
  } catch (err) {
    problems.push(...fileProblems('DATABASE_URL', err));
  }
  const values = { ...collectEnv(BASE_ENV, env, problems), ...collectEnv(NODE_ENV, env, problems) } as NodeValues;
  // TLS: libpq's PGSSL* variables fill in the URL's query; the broker's files are read now.
  if (values.databaseUrl !== undefined) values.databaseUrl = pgUrlWithTls(values.databaseUrl, env, problems);
  const amqpTls = mode === 'fleet' ? amqpTlsOptions(values.amqpUrl, env, problems) : undefined;

  let embedded: EmbeddedSettings | undefined;
  if (mode === 'embedded') {
    try {
      embedded = embeddedSettings({ dataDir: values.dataDir, configPath: values.configPath });
    } catch (err) {
      problems.push(...fileProblems('EVERDICT_CONFIG', err));
    }
  }
  const configPath = embedded?.configPath ?? values.configPath;
  const has = (r: Requirement) => r === 'EVERDICT_CONFIG' && configPath !== undefined;
  const chosen = selectServices(requested, has, mode);
  problems.push(...chosen.problems);
  const { services: defs, skipped } = chosen;
  // Broker logins: per service when EVERDICT_AMQP_USERS is set (passwords may come from *_FILE).
  let broker: BrokerLogin | undefined;
  if (mode === 'fleet' && values.amqpUrl !== undefined) {
    env = resolveSecretFiles(env, defs.map((d) => amqpPasswordEnv(d.name)), problems, { fromFiles: secretsFromFiles });
    const planned = brokerLogin(env, values.amqpUrl, defs.map((d) => d.name));
    problems.push(...planned.problems);
    broker = planned.login;
  }
  // Only the selected services' code is loaded (services.ts says why).
  const modules = await Promise.all(defs.map((def) => def.load()));
  const chosenEnv = defs.map((def, i) => ({ def, module: modules[i]!, values: collectEnv(modules[i]!.env, env, problems) as Record<string, unknown> }));

  let loaded: LoadedFleetConfig | undefined;
  if (configPath !== undefined && defs.length > 0) {
    try {
      loaded = loadFleetConfig(configPath);
    } catch (err) {
      problems.push(...fileProblems('EVERDICT_CONFIG', err));
    }
  }
  if (loaded !== undefined) env = resolveSecretFiles(env, configSecretNames(loaded), problems, { fromFiles: secretsFromFiles });
  const services: PlannedService[] = chosenEnv.map((s) => ({ ...s, prepared: s.module.prepare?.(s.values as never, env, problems) }));

  let crashPoints: crash.CrashPoints<string> = crash.noCrashPoints;
  if (values.crashSpec !== undefined) {
    const points = modules.flatMap((m) => m.crashPoints);
    if (points.length === 0 && defs.length > 0) {
      problems.push({ name: 'EVERDICT_CRASHPOINT', reason: `no service of this node has crash points (${defs.map((d) => d.name).join(', ')}); the turn-worker and the execution-coordinator do` });
    } else if (points.length > 0) {
      try {
        crash.parseCrashSpec(points, values.crashSpec);
        crashPoints = crash.crashPointsFromEnv(points, { EVERDICT_CRASHPOINT: values.crashSpec, EVERDICT_CRASH_LOG: values.crashLog });
      } catch (err) {
        problems.push(...fileProblems('EVERDICT_CRASHPOINT', err));
      }
    }
  }

  let topology: Topology | undefined;
  try {
    topology = loadTopology({ prefix: values.amqpPrefix ?? 'everdict' });
  } catch (err) {
    problems.push(...fileProblems('rabbitmq/definitions.json', err));
  }

  let connectors: ConnectorSet | undefined;
  // The embedded node serves the demo notebook itself, so it supplies the notebook's address.
  const embeddedDemoNotes = mode === 'embedded' && loaded !== undefined && (env[DEMO_NOTES_URL_ENV]?.trim() ?? '') === '' && connectorEnvNames(loaded.config.connectors).some((n) => n.variable === DEMO_NOTES_URL_ENV);
  const connectorEnv: Env = embeddedDemoNotes ? { ...env, [DEMO_NOTES_URL_ENV]: demoNotesUrl(opts.port ?? values.port ?? 8080) } : env;
  // The services of this node that open connectors, each with the JSON path that makes it.
  const opening = loaded === undefined ? [] : defs.flatMap((d) => {
    const path = d.connectorsFor?.(loaded!.config);
    return path === undefined ? [] : [{ name: d.name, path }];
  });
  if (loaded !== undefined && opening.length > 0) {
    const unset = connectorEnvProblems(loaded.config.connectors, connectorEnv);
    const by = opening.map((o) => (o.path === '/connectors' ? o.name : `${o.name} (${o.path} of EVERDICT_CONFIG lists connector reads)`)).join(', ');
    for (const u of unset) problems.push({ name: u.variable, reason: `is required by ${by}: ${u.path} of EVERDICT_CONFIG names it` });
    if (unset.length === 0) {
      try {
        connectors = await openConnectors(loaded.config.connectors, connectorEnv);
      } catch (err) {
        problems.push(...fileProblems('EVERDICT_CONFIG', err));
      }
    }
  }

  if (problems.length > 0) {
    await connectors?.close();
    throw new ConfigError(problems);
  }
  return {
    mode,
    services,
    skipped,
    values,
    loaded: loaded!,
    connectors,
    crash: crashPoints,
    topology: topology!,
    poolSize: Math.max(...modules.map((m) => m.poolSize?.(loaded!) ?? 10)),
    embedded,
    demoNotes: embeddedDemoNotes,
    secretsFromFiles,
    brokerLogin: broker,
    amqpTls,
  };
}
