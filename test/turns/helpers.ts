/**
 * Cross-process fixtures for the turn-worker: a migrated database and a broker name prefix of
 * the test file's own, a fleet config + model scripts in a scratch folder, and real worker
 * processes (`everdict start --service turn-worker`, from source) that can
 * be SIGKILLed, SIGSTOPped and SIGCONTinued. Everything on the broker is deleted at the end.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import amqplib from 'amqplib';
import { buildEnvelope, encodeEnvelope, operatorActionOf, systemClock } from '@everdict/contracts';
import type { CurrentVersion, FleetConfig, MessageType, PayloadOf } from '@everdict/contracts';
import { deleteTopology, loadTopology } from '@everdict/bus';
import { Store, createPgDb, migrate } from '@everdict/store';
import type { Db } from '@everdict/store';
import { TEST_AMQP_URL, TEST_DATABASE_URL, amqpPrefix, eventually, everdictStartArgs, freshDatabase, readinessBudgetMs, freePort } from '@everdict/testkit';
import { intakeApi, openCase } from '@everdict/intake';
import { PrincipalDirectory } from '@everdict/http-api';

export const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');

export interface ScriptStep {
  text?: string | null;
  toolCalls?: { name: string; arguments?: Record<string, unknown> }[];
  error?: { kind: string; status?: number };
  usage?: { inputTokens: number; outputTokens: number };
}

export const call = (...calls: [string, Record<string, unknown>?][]): ScriptStep => ({ toolCalls: calls.map(([name, args]) => ({ name, arguments: args ?? {} })) });
export const say = (text: string): ScriptStep => ({ text });

export interface WorkerProc {
  readonly name: string;
  readonly proc: ChildProcess;
  readonly port: number;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  signal(sig: NodeJS.Signals): void;
  stop(): Promise<void>;
}

export interface TurnsFixture {
  readonly db: Db;
  readonly store: Store;
  readonly dbUrl: string;
  readonly prefix: string;
  readonly dir: string;
  readonly configPath: string;
  config: FleetConfig;
  writeConfig(config: FleetConfig): void;
  writeScript(name: string, steps: ScriptStep[]): string;
  worker(name: string, env?: Record<string, string>): Promise<WorkerProc>;
  openCase(caseType: string, objective: string): Promise<{ caseId: string; taskId: string }>;
  /** Sends a message as another service would: an outbox row a worker's relay publishes. */
  sendAs<T extends MessageType>(type: T, caseId: string, payload: PayloadOf<T, CurrentVersion<T>>, sender?: 'operator' | 'gate'): Promise<string>;
  rows<R = Record<string, unknown>>(text: string, values?: unknown[]): Promise<R[]>;
  close(): Promise<void>;
}


export async function turnsFixture(label: string, config: FleetConfig): Promise<TurnsFixture> {
  const info = await freshDatabase(label);
  const db = createPgDb(info.url, { max: 6 });
  await migrate(db);
  const store = new Store(db);
  const prefix = amqpPrefix(label);
  const dir = mkdtempSync(join(tmpdir(), `ev-turns-${label}-`));
  const configPath = join(dir, 'fleet.json');
  const workers: WorkerProc[] = [];
  const fx: TurnsFixture = {
    db,
    store,
    dbUrl: info.url,
    prefix,
    dir,
    configPath,
    config,
    writeConfig(c) {
      fx.config = c;
      writeFileSync(configPath, JSON.stringify(c, null, 2));
    },
    writeScript(name, steps) {
      const path = join(dir, `${name}.json`);
      writeFileSync(path, JSON.stringify({ steps }));
      return path;
    },
    async worker(name, env = {}) {
      const port = await freePort();
      const proc = spawn(process.execPath, everdictStartArgs(['turn-worker']), {
        cwd: REPO,
        env: {
          ...process.env,
          DATABASE_URL: info.url,
          AMQP_URL: TEST_AMQP_URL,
          EVERDICT_CONFIG: configPath,
          EVERDICT_AMQP_PREFIX: prefix,
          EVERDICT_WORKER_NAME: name,
          PORT: String(port),
          LOG_LEVEL: process.env.TURNS_LOG_LEVEL ?? 'warn',
          ...env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      const keep = (b: Buffer) => {
        out = (out + b.toString()).slice(-200_000);
      };
      proc.stdout!.on('data', keep);
      proc.stderr!.on('data', keep);
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => proc.once('exit', (code, signal) => res({ code, signal })));
      let gone = false;
      void exited.then(() => (gone = true));
      const w: WorkerProc = {
        name,
        proc,
        port,
        exited,
        output: () => out,
        async metric(metricName, labels = {}) {
          const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
          let sum = 0;
          for (const line of text.split('\n')) {
            if (!line.startsWith(metricName)) continue;
            const m = /^([a-z_]+)(\{[^}]*\})?\s+([0-9.eE+-]+)$/.exec(line);
            if (!m || m[1] !== metricName) continue;
            const lbl = m[2] ?? '';
            if (Object.entries(labels).every(([k, v]) => lbl.includes(`${k}="${v}"`))) sum += Number(m[3]);
          }
          return sum;
        },
        signal(sig) {
          if (!gone) proc.kill(sig);
        },
        async stop() {
          if (gone) return;
          proc.kill('SIGTERM');
          const t = setTimeout(() => proc.kill('SIGKILL'), 12_000);
          await exited;
          clearTimeout(t);
        },
      };
      workers.push(w);
      await eventually(
        async () => {
          if (gone) throw new Error(`worker ${name} exited during start:\n${out.slice(-3000)}`);
          const r = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null);
          return r?.status === 200;
        },
        { timeoutMs: readinessBudgetMs(), intervalMs: 100, what: `worker ${name} ready` },
      ).catch((err: unknown) => {
        throw new Error(`${String(err)}\n${out.slice(-3000)}`);
      });
      return w;
    },
    async openCase(caseType, objective) {
      return openTestCase(store, fx.config, { caseType, objective, originKey: `${label}-${Math.random()}` });
    },
    async sendAs(type, caseId, payload, sender = 'operator') {
      // An operator's control (and a human's answer) goes out as intake sends it: from intake —
      // no process publishes as `operator` (producers.ts) — with the operator action recorded in
      // the same unit of work (receivers check for that record, §4).
      const service = sender === 'operator' ? 'intake' : sender;
      const envelope = buildEnvelope(
        { type, version: 1 as CurrentVersion<typeof type>, caseId, lineage: { rootCaseId: caseId, parentTaskId: null, ancestry: [] }, sender: { service, taskId: null, profile: null, profileVersion: null }, trust: 'platform', payload },
        systemClock,
      );
      const action = service === 'intake' ? operatorActionOf(type, payload as { taskId: string }, envelope.id) : undefined;
      await store.unitOfWork(async (uow) => {
        await uow.enqueue({ id: envelope.id, type, caseId }, encodeEnvelope(envelope));
        if (action) await uow.appendLedger(caseId, { kind: action.kind, body: action.match });
      });
      return envelope.id;
    },
    async rows(text, values = []) {
      return (await db.query<never>({ text, values })).rows;
    },
    async close() {
      await Promise.allSettled(workers.map((w) => w.stop()));
      const conn = await amqplib.connect(TEST_AMQP_URL);
      const ch = await conn.createChannel();
      await deleteTopology(ch, loadTopology({ prefix })).catch(() => {});
      await conn.close().catch(() => {});
      await db.close();
    },
  };
  fx.writeConfig(config);
  return fx;
}

/** A fleet config for tests: scripted routes over the given scripts, a static read tool. */
export function testConfig(p: { routes: Record<string, string>; profiles: FleetConfig['profiles']; caseTypes?: FleetConfig['caseTypes']; runtime?: FleetConfig['runtime']; tools?: FleetConfig['tools'] }): FleetConfig {
  return {
    version: 1,
    routes: Object.fromEntries(Object.entries(p.routes).map(([name, script]) => [name, { adapter: 'scripted' as const, model: `script-${name}`, scriptPath: script }])),
    tools: p.tools ?? { lookup: { builtin: 'static', description: 'Look something up in the knowledge base.', output: 'found: the answer is 42' } },
    profiles: p.profiles,
    caseTypes: p.caseTypes ?? { ticket: { rootProfile: Object.keys(p.profiles)[0]!, scope: { reads: 'all', writes: [], forbidden: [] } } },
    runtime: { leaseTtlMs: 1500, sweepIntervalMs: 250, ...(p.runtime ?? {}) },
  };
}

/** Model asks logged by the workers (EVERDICT_MODEL_LOG). */
export function modelAsks(path: string): { taskId: string; turn: number; route: string; pid: number; at: number }[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { taskId: string; turn: number; route: string; pid: number; at: number });
}

export { eventually, TEST_DATABASE_URL };

/**
 * Opens a case exactly as intake's case API does (intake's `openCase`: the case with its case
 * type's scope, the root task under its root profile and budget, its task.runnable and the
 * `case_opened` record, in one unit of work), for customer `acme`.
 */
export async function openTestCase(store: Store, config: FleetConfig, c: { caseType: string; objective: string; originKey: string }): Promise<{ caseId: string; taskId: string }> {
  const arrival = { source: 'api' as const, originKey: c.originKey, customer: 'acme', title: c.objective, body: '', receivedAt: new Date().toISOString(), attachments: [], raw: { kind: 'api' as const, principal: 'test', clientKey: c.originKey } };
  const opened = await openCase(store, config, { arrival, caseType: c.caseType, customer: 'acme', principal: 'test' });
  if (!opened.rootTaskId) throw new Error(`origin key ${c.originKey} was opened before`);
  return { caseId: opened.caseId, taskId: opened.rootTaskId };
}

/**
 * The intake API served in the test process on the fixture's database (the worker's relay
 * publishes what it enqueues): operator surfaces without a second process. An unhandled route is 404.
 */
export async function serveIntakeApi(fx: Pick<TurnsFixture, 'store' | 'config'>): Promise<{ url: string; close(): Promise<void> }> {
  const api = intakeApi({ store: fx.store, fleet: () => fx.config, principals: () => new PrincipalDirectory(fx.config.principals), metrics: { opened: () => {}, refused: () => {} } });
  const server = createServer((req, res) => {
    Promise.resolve(api(req, res)).then(
      (handled: boolean) => {
        if (!handled) res.writeHead(404).end();
      },
      (err: unknown) => res.writeHead(500).end(String(err)),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
}
