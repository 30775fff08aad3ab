/**
 * The composition root and connector reads: a turn-worker needs EVERDICT_CONNECTORS only when a
 * profile of its fleet config lists `reads`; then the plan opens the connector set for it, and a
 * SIGHUP adding `reads` to a node that runs without connectors is refused.
 */
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { FleetConfig } from '@everdict/contracts';
import { ConfigError } from '@everdict/service-kit';
import type { EverdictMetrics, LoadedFleetConfig, ServiceContext } from '@everdict/service-kit';
import { planNode } from '../src/node/plan.js';
import { fleetReloader } from '../src/node/reload.js';
import { SERVICE_DEFS } from '../src/node/services.js';

const dir = mkdtempSync(join(tmpdir(), 'everdict-cli-reads-'));

function fleet(reads: string[] | undefined): string {
  const config: FleetConfig = {
    version: 1,
    routes: { r: { adapter: 'scripted', model: 'm', scriptPath: 's.json' } },
    profiles: { p: { version: '1', route: 'r', prompt: 'x', ...(reads ? { reads } : {}) } },
    caseTypes: { t: { rootProfile: 'p', scope: { reads: ['billing'], writes: [], forbidden: [] } } },
    connectors: { billing: { kind: 'http', operations: { 'accounts.get': { access: 'read' } } } },
  };
  const path = join(dir, `fleet-${reads ? 'reads' : 'plain'}.json`);
  writeFileSync(path, JSON.stringify(config));
  return path;
}

const connectorsPath = join(dir, 'connectors.json');
writeFileSync(
  connectorsPath,
  JSON.stringify({
    connectors: [
      {
        kind: 'http',
        name: 'billing',
        target: { system: 'billing', environment: 'test' },
        baseUrl: 'http://127.0.0.1:9/api',
        receipts: { path: '/receipts/{idempotencyKey}', conclusive: false },
        operations: [{ name: 'accounts.get', kind: 'read', method: 'GET', path: '/accounts/{accountId}', params: { accountId: { type: 'string' } } }],
      },
    ],
  }),
);

// Fleet mode; nothing is contacted while planning.
const env = (extra: Record<string, string>) => ({ DATABASE_URL: 'postgres://u@127.0.0.1:9/x', AMQP_URL: 'amqp://127.0.0.1:9', ...extra });

async function planProblems(configPath: string, extra: Record<string, string> = {}) {
  try {
    const plan = await planNode(['turn-worker'], env({ EVERDICT_CONFIG: configPath, ...extra }));
    await plan.connectors?.close();
    return { problems: [], connectors: plan.connectors?.names() ?? null };
  } catch (err) {
    if (err instanceof ConfigError) return { problems: err.fields.map((f) => `${f.name}: ${f.reason}`), connectors: null };
    throw err;
  }
}

describe('a turn-worker and connector reads in the plan', () => {
  it('without reads needs nothing new and opens no connectors', async () => {
    expect(await planProblems(fleet(undefined))).toEqual({ problems: [], connectors: null });
  });

  it('with reads needs EVERDICT_CONNECTORS, naming the profile that reads', async () => {
    expect((await planProblems(fleet(['billing/accounts.get']))).problems).toEqual([expect.stringMatching(/^EVERDICT_CONNECTORS: is required by turn-worker: \/profiles\/p\/reads of EVERDICT_CONFIG lists connector reads/)]);
  });

  it('with reads and a connectors file, opens the set for it', async () => {
    expect(await planProblems(fleet(['billing/accounts.get']), { EVERDICT_CONNECTORS: connectorsPath })).toEqual({ problems: [], connectors: ['billing'] });
  });
});

describe('a SIGHUP on a node without connectors', () => {
  it('refuses a config whose profiles list reads, and keeps the running one', () => {
    const path = join(dir, 'reload.json');
    const counted: string[] = [];
    const logger = { info: () => undefined, error: () => undefined } as unknown as ServiceContext['logger'];
    const counter = { inc: (l: { outcome: string }) => void counted.push(l.outcome) } as unknown as EverdictMetrics['config']['reloads'];
    const applied: unknown[] = [];
    // As start.ts judges it for a node running the turn-worker without connectors.
    const unmet = (next: LoadedFleetConfig) => {
      const at = SERVICE_DEFS['turn-worker'].connectorsFor?.(next.config);
      return at === undefined ? [] : [{ path: at, message: 'lists connector reads' }];
    };
    const reload = fleetReloader({ path, connectors: undefined, unmet, logger, counter, apply: (c) => void applied.push(c) });

    copyFileSync(fleet(['billing/accounts.get']), path);
    expect(reload()).toEqual({ applied: false, problems: [{ path: '/profiles/p/reads', message: 'lists connector reads' }] });
    copyFileSync(fleet(undefined), path);
    expect(reload()).toMatchObject({ applied: true });
    expect(counted).toEqual(['refused', 'applied']);
    expect(applied).toHaveLength(1);
  });
});
