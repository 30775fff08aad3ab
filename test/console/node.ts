/**
 * A real fleet node running the demo, for the console's browser tests: `everdict start` with
 * every service (libs/testkit's startEverdictNode, the one composition root) on a database and
 * broker prefix of this file's own, with the sample fleet config (infra/config/fleet.json) and
 * its demo notebook served by the node itself — the same demo `npm start` runs, on real Postgres
 * and RabbitMQ. The config gains one principal of another customer, so ownership can be tried.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { createServer, connect } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { sha256Hex } from '@everdict/contracts';
import { TEST_AMQP_URL, amqpPrefix, freePort, freshDatabase, startEverdictNode } from '@everdict/testkit';
import { deletePrefixTopology } from '../intake/helpers.js';

export const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');
const SAMPLE_CONFIG = join(REPO, 'infra', 'config', 'fleet.json');

/** The sample config's demo-only tokens (cli/src/embedded.ts DEMO_TOKENS), and one of another customer. */
export const TOKENS = {
  requester: 'everdict-demo-requester',
  approver: 'everdict-demo-approver',
  outsider: 'console-test-acme-requester',
} as const;

export const CHROMIUM = '/usr/bin/chromium';

/**
 * Refuses a missing or stale console/dist: `npm test` builds it once before the suite (other
 * files read it too, e.g. the image tree), so rebuilding here would race them; a dist older than
 * any console source would test old code.
 */
export function requireFreshConsoleBuild(): void {
  const index = join(REPO, 'console', 'dist', 'index.html');
  const hint = 'run `npm run build -w @everdict/console` (npm test does)';
  if (!existsSync(index)) throw new Error(`console/dist/index.html is missing: ${hint}`);
  const built = statSync(index).mtimeMs;
  const sources = [join(REPO, 'console', 'index.html'), join(REPO, 'console', 'vite.config.ts'), ...filesUnder(join(REPO, 'console', 'src'))];
  const stale = sources.filter((f) => statSync(f).mtimeMs > built);
  if (stale.length > 0) throw new Error(`console/dist is older than ${stale.map((f) => f.slice(REPO.length + 1)).join(', ')}: ${hint}`);
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)]));
}

export interface DemoNode {
  readonly url: string;
  output(): string;
  stop(): Promise<void>;
}

/**
 * The sample config with absolute script paths (it is written elsewhere), the outsider principal,
 * a second required decision on the demo gate, and the demo agent's script with one `plan` call
 * added to its first turn (fixtures/): the sample demo drafts no plan, and the console's plan view
 * is part of what is shown.
 */
function demoConfig(): Record<string, unknown> {
  const config = JSON.parse(readFileSync(SAMPLE_CONFIG, 'utf8')) as {
    routes: Record<string, { scriptPath?: string }>;
    principals: Record<string, unknown>;
    gatePolicies: Record<string, { decisions: { decision: string; role: string }[] }>;
  };
  for (const route of Object.values(config.routes)) {
    if (route.scriptPath && !isAbsolute(route.scriptPath)) route.scriptPath = join(REPO, 'infra', 'config', route.scriptPath);
  }
  config.routes['demo-agent']!.scriptPath = join(REPO, 'test', 'console', 'fixtures', 'demo-case-with-plan.json');
  config.principals['acme-requester'] = { tokenHash: `sha256:${sha256Hex(TOKENS.outsider)}`, roles: ['customer'], customers: ['acme'] };
  // A note needs a second decision, whose role the demo approver also holds: one click in the
  // console must record both, each as its own decision.
  const approver = config.principals['demo-approver'] as { roles: string[] };
  approver.roles = [...approver.roles, 'notebook-owner'];
  config.gatePolicies['note']!.decisions.push({ decision: 'owner-consent', role: 'notebook-owner' });
  return config;
}

export async function startDemoNode(label: string): Promise<DemoNode> {
  const database = await freshDatabase(label);
  const prefix = amqpPrefix(label);
  const dir = mkdtempSync(join(tmpdir(), 'everdict-console-ui-'));
  writeFileSync(join(dir, 'fleet.json'), JSON.stringify(demoConfig(), null, 2));
  const port = await freePort();
  const node = await startEverdictNode({
    services: [],
    port,
    env: {
      DATABASE_URL: database.url,
      AMQP_URL: TEST_AMQP_URL,
      EVERDICT_AMQP_PREFIX: prefix,
      EVERDICT_CONFIG: join(dir, 'fleet.json'),
      EVERDICT_DEMO_NOTES_DIR: join(dir, 'notes'),
      EVERDICT_DEMO_NOTES_URL: `http://127.0.0.1:${port}/demo/notes`,
    },
    readyBaseMs: 60_000,
    readyIntervalMs: 200,
  });
  const stop = async () => {
    await node.stop();
    await deletePrefixTopology(prefix);
    await database.drop();
  };
  return { url: node.url, output: node.output, stop };
}

export interface Reply {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

/** A bearer-token request, for setting up and for checking what the UI shows against the API. */
export async function call(base: string, method: string, path: string, token: string, body?: unknown): Promise<Reply> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${base}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await res.text();
  return { status: res.status, body: text.length ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

/** Every seq of the case's ledger, paging GET /v1/cases/:id/ledger to its end. */
export async function ledgerSeqs(base: string, caseId: string, token: string): Promise<number[]> {
  const seqs: number[] = [];
  let after = 0;
  for (;;) {
    const r = await call(base, 'GET', `/v1/cases/${caseId}/ledger?after=${after}&limit=1000`, token);
    if (r.status !== 200) throw new Error(`GET ledger answered ${r.status}`);
    const entries = r.body['entries'] as { seq: number }[];
    seqs.push(...entries.map((e) => e.seq));
    const next = r.body['next'] as number | null;
    if (next === null) return seqs;
    after = next;
  }
}

export interface CuttableLink {
  /** The node's URL through the link. */
  readonly url: string;
  /** Connections cut so far. */
  cuts(): number;
  /** Destroys every open connection and refuses new ones for `ms`: the network drops mid-stream. */
  cut(ms: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * A TCP relay between the browser and the node, so a test can kill the browser's connections —
 * the live ledger stream included — the way a network failure does (Chromium's offline emulation
 * leaves an open event stream alone). Test-side only: the node is not told anything.
 */
export async function cuttableLink(target: string): Promise<CuttableLink> {
  const { port, hostname } = new URL(target);
  const open = new Set<Socket>();
  let down = false;
  let cuts = 0;
  const server = createServer((client) => {
    if (down) return void client.destroy();
    const upstream = connect(Number(port), hostname);
    for (const s of [client, upstream]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => undefined);
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${address.port}`,
    cuts: () => cuts,
    async cut(ms) {
      down = true;
      cuts += open.size;
      for (const s of open) s.destroy();
      await new Promise((r) => setTimeout(r, ms));
      down = false;
    },
    async close() {
      for (const s of open) s.destroy();
      await new Promise((r) => server.close(() => r(undefined)));
    },
  };
}
