/**
 * `promtool check metrics` on each service's LIVE /metrics (issue 6 acceptance): the five
 * services as a fleet runs them — one `everdict start --service NAME` process each, against real
 * Postgres and RabbitMQ with the sample fleet config — and the embedded node that runs all five
 * in one process. Each page must pass promtool, expose every catalogued metric its service
 * exports (with the catalogued type), and expose no everdict_ metric the catalog does not list
 * for that service. The processes are the compiled CLI (see test/embedded/node.ts).
 *
 * promtool: $PROMTOOL, else PATH (testkit's promtoolBinary); each check fails when it is missing.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import amqplib from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deleteTopology, loadTopology } from '@everdict/bus';
import { TEST_AMQP_URL, amqpPrefix, freshDatabase, promtool } from '@everdict/testkit';
import { REPO, startEverdict } from '../embedded/node.js';
import type { EverdictNode } from '../embedded/node.js';

const SERVICES = ['intake', 'turn-worker', 'gate', 'execution-coordinator', 'reconciler'] as const;

interface CatalogEntry {
  name: string;
  type: string;
  exportedBy: string[];
  status: 'exported' | 'planned' | 'synthetic';
}
const catalog = (JSON.parse(readFileSync(join(REPO, 'infra', 'metrics-catalog.json'), 'utf8')) as { metrics: CatalogEntry[] }).metrics;
const byName = new Map(catalog.map((m) => [m.name, m]));

const typesOn = (body: string) => new Map([...body.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));

describe('live /metrics of every service, as the fleet and the embedded node run them', () => {
  const prefix = amqpPrefix('live_metrics');
  const nodes = new Map<string, EverdictNode>();
  let drop: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    const database = await freshDatabase('live_metrics');
    drop = database.drop;
    const dir = mkdtempSync(join(tmpdir(), 'everdict-live-metrics-'));
    const fleetEnv = {
      DATABASE_URL: database.url,
      AMQP_URL: TEST_AMQP_URL,
      EVERDICT_AMQP_PREFIX: prefix,
      EVERDICT_CONFIG: join(REPO, 'infra', 'config', 'fleet.json'),
      // The sample config's `notes` connector; the address is never contacted (no effect runs here).
      EVERDICT_DEMO_NOTES_URL: 'http://127.0.0.1:9/demo/notes',
    };
    const started = await Promise.allSettled([
      ...SERVICES.map(async (s) => nodes.set(s, await startEverdict({ args: ['--service', s], env: fleetEnv }))),
      (async () => nodes.set('embedded', await startEverdict({ env: { EVERDICT_DATA_DIR: join(dir, 'embedded') } })))(),
    ]);
    const failed = started.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed.length) throw failed[0]!.reason;
  }, 120_000);

  afterAll(async () => {
    const codes = await Promise.all([...nodes.values()].map((n) => n.stop('SIGTERM')));
    const conn = await amqplib.connect(TEST_AMQP_URL);
    const ch = await conn.createChannel();
    await deleteTopology(ch, loadTopology({ prefix }));
    await conn.close();
    await drop?.();
    expect(codes.every((c) => c === 0), `exit codes ${codes.join(',')}`).toBe(true);
  });

  for (const name of [...SERVICES, 'embedded'] as const) {
    it(`${name}: promtool check metrics passes on its live /metrics, which matches the catalog`, async () => {
      const node = nodes.get(name)!;
      const res = await fetch(`${node.url}/metrics`);
      expect(res.status).toBe(200);
      const body = await res.text();
      const verdict = promtool(['check', 'metrics'], { input: body });
      expect(verdict.status, verdict.output).toBe(0);

      // The embedded node runs every service, so it exports everything any of them does.
      const service = name === 'embedded' ? 'everdict' : name;
      const serves = (m: CatalogEntry) => m.status === 'exported' && (name === 'embedded' || m.exportedBy.includes(name));
      expect(body).toContain(`service="${service}"`);
      const onPage = typesOn(body);
      for (const m of catalog.filter(serves)) expect(onPage.get(m.name), `${m.name} on the live /metrics of ${name}`).toBe(m.type);
      const unlisted = [...onPage.keys()].filter((n) => n.startsWith('everdict_') && !(byName.has(n) && serves(byName.get(n)!)));
      expect(unlisted, `everdict_ metrics ${name} exports that the catalog does not list for it`).toEqual([]);
    });
  }
});
