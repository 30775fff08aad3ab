/**
 * The composition root and the one connector declaration: the plan checks, before anything is
 * touched, every variable the fleet config's connectors name for the services that open them
 * (the coordinator and reconciler always; a turn-worker only when a profile lists `reads`), and
 * a SIGHUP changing the `connectors` section — or adding `reads` to a node that runs without
 * connectors — is refused.
 */
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { FleetConfig, FleetHttpConnector } from '@everdict/contracts';
import { ConfigError } from '@everdict/service-kit';
import type { EverdictMetrics, LoadedFleetConfig, ServiceContext } from '@everdict/service-kit';
import { planNode } from '../src/node/plan.js';
import { fleetReloader } from '../src/node/reload.js';
import { SERVICE_DEFS } from '../src/node/services.js';

const dir = mkdtempSync(join(tmpdir(), 'everdict-cli-reads-'));

const billing: FleetHttpConnector = {
  kind: 'http',
  target: { system: 'billing', environment: 'test' },
  baseUrlEnv: 'BILLING_URL',
  headersFromEnv: { Authorization: 'BILLING_TOKEN' },
  receipts: { path: '/receipts/{idempotencyKey}', conclusive: false },
  operations: { 'accounts.get': { access: 'read', method: 'GET', path: '/accounts/{accountId}', params: { accountId: { type: 'string' } } } },
};

function fleet(reads: string[] | undefined, connector: FleetHttpConnector = billing, label = reads ? 'reads' : 'plain'): string {
  const config: FleetConfig = {
    version: 1,
    routes: { r: { adapter: 'scripted', model: 'm', scriptPath: 's.json' } },
    profiles: { p: { version: '1', route: 'r', prompt: 'x', ...(reads ? { reads } : {}) } },
    caseTypes: { t: { rootProfile: 'p', scope: { reads: ['billing'], writes: [], forbidden: [] } } },
    connectors: { billing: connector },
  };
  const path = join(dir, `fleet-${label}.json`);
  writeFileSync(path, JSON.stringify(config));
  return path;
}

const SECRET = 'Bearer never-echoed-0001';
const set = { BILLING_URL: 'http://127.0.0.1:9/api', BILLING_TOKEN: SECRET };
// Fleet mode; nothing is contacted while planning.
const env = (extra: Record<string, string>) => ({ DATABASE_URL: 'postgres://u@127.0.0.1:9/x', AMQP_URL: 'amqp://127.0.0.1:9', ...extra });

async function planProblems(services: string[], configPath: string, extra: Record<string, string> = {}) {
  try {
    const plan = await planNode(services, env({ EVERDICT_CONFIG: configPath, ...extra }));
    await plan.connectors?.close();
    return { problems: [], connectors: plan.connectors?.names() ?? null };
  } catch (err) {
    if (err instanceof ConfigError) return { problems: err.fields.map((f) => `${f.name}: ${f.reason}`), connectors: null };
    throw err;
  }
}

describe('the plan and the connectors the fleet config declares', () => {
  it('a turn-worker without reads opens no connectors and needs none of their variables', async () => {
    expect(await planProblems(['turn-worker'], fleet(undefined))).toEqual({ problems: [], connectors: null });
  });

  it('a turn-worker with reads needs every variable the connectors name, each named with its JSON path', async () => {
    expect((await planProblems(['turn-worker'], fleet(['billing/accounts.get']), { BILLING_TOKEN: SECRET })).problems).toEqual([
      'BILLING_URL: is required by turn-worker (/profiles/p/reads of EVERDICT_CONFIG lists connector reads): /connectors/billing/baseUrlEnv of EVERDICT_CONFIG names it',
    ]);
    expect(await planProblems(['turn-worker'], fleet(['billing/accounts.get']), set)).toEqual({ problems: [], connectors: ['billing'] });
  });

  it('the coordinator and reconciler always open them; a missing credential is named, never a value', async () => {
    const got = await planProblems(['execution-coordinator', 'reconciler'], fleet(undefined), { BILLING_URL: set.BILLING_URL });
    expect(got.problems).toEqual(['BILLING_TOKEN: is required by execution-coordinator, reconciler: /connectors/billing/headersFromEnv/Authorization of EVERDICT_CONFIG names it']);
    expect(await planProblems(['execution-coordinator', 'reconciler'], fleet(undefined), set)).toEqual({ problems: [], connectors: ['billing'] });
    expect(await planProblems(['gate'], fleet(undefined))).toEqual({ problems: [], connectors: null });
  });

  it('a connector that fails its own review is a problem of EVERDICT_CONFIG at the connector path', async () => {
    const bad = { ...billing, operations: { 'accounts.get': { access: 'read' as const, method: 'POST' as const, path: '/accounts/{accountId}', params: { accountId: { type: 'string' as const } } } } };
    const { problems } = await planProblems(['reconciler'], fleet(undefined, bad, 'bad'), set);
    expect(problems).toEqual([expect.stringMatching(/^EVERDICT_CONFIG: \/connectors\/billing .*accounts\.get/)]);
    expect(problems.join()).not.toContain(SECRET);
  });
});

describe('a SIGHUP', () => {
  const logger = { info: () => undefined, error: () => undefined } as unknown as ServiceContext['logger'];
  const harness = (running: string, unmet?: (next: LoadedFleetConfig) => { path: string; message: string }[]) => {
    const path = join(dir, `reload-${Math.random().toString(36).slice(2)}.json`);
    const counted: string[] = [];
    const counter = { inc: (l: { outcome: string }) => void counted.push(l.outcome) } as unknown as EverdictMetrics['config']['reloads'];
    const applied: unknown[] = [];
    const runningConfig = JSON.parse(readFileSync(running, 'utf8')) as FleetConfig;
    const reload = fleetReloader({ path, running: runningConfig, ...(unmet ? { unmet } : {}), logger, counter, apply: (c) => void applied.push(c) });
    return { path, counted, applied, reload };
  };

  it('on a node without connectors refuses a config whose profiles list reads, and keeps the running one', () => {
    // As start.ts judges it for a node running the turn-worker without connectors.
    const unmet = (next: LoadedFleetConfig) => {
      const at = SERVICE_DEFS['turn-worker'].connectorsFor?.(next.config);
      return at === undefined ? [] : [{ path: at, message: 'lists connector reads' }];
    };
    const h = harness(fleet(undefined), unmet);
    copyFileSync(fleet(['billing/accounts.get']), h.path);
    expect(h.reload()).toEqual({ applied: false, problems: [{ path: '/profiles/p/reads', message: 'lists connector reads' }] });
    copyFileSync(fleet(undefined), h.path);
    expect(h.reload()).toMatchObject({ applied: true });
    expect(h.counted).toEqual(['refused', 'applied']);
    expect(h.applied).toHaveLength(1);
  });

  it('refuses a changed connectors section: connectors are opened at start, so the change needs a restart', () => {
    const h = harness(fleet(undefined));
    copyFileSync(fleet(undefined, { ...billing, timeoutMs: 500 }, 'changed'), h.path);
    expect(h.reload()).toEqual({ applied: false, problems: [{ path: '/connectors', message: 'changed: a connectors change needs a restart (connectors are opened at start)' }] });
    copyFileSync(fleet(['billing/accounts.get']), h.path);
    expect(h.reload()).toMatchObject({ applied: true });
    expect(h.counted).toEqual(['refused', 'applied']);
  });
});
