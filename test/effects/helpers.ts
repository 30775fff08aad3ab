/**
 * Fixtures for the effect tests (issue 5): a migrated database and broker prefix of the test
 * file's own, a REAL target HTTP service (node:http) that counts every request and keeps its own
 * idempotency receipts, a REAL target Postgres database for the estate connector, a fleet config
 * (connectors declared in it, endpoints by variable) in a scratch folder, and real service processes that can be SIGKILLed.
 *
 * The tests stand in for the turn-worker: they write the packet paper and enqueue
 * `gate.requested` in one unit of work, exactly as `writes.propose` would; the services' own
 * outbox relays publish it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, writeFileSync, readFileSync, existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { buildEnvelope, canonicalJson, encodeEnvelope, newId, sealPacket, sha256Hex, systemClock } from '@everdict/contracts';
import type { EffectCheck, EffectPacket, FleetConfig } from '@everdict/contracts';
import { declaredTemplateHash } from '@everdict/connectors';
import { PACKET_PAPER_SCHEMA, Store, createPgDb, migrate } from '@everdict/store';
import type { Db, UnitOfWork } from '@everdict/store';
import { TEST_AMQP_URL, amqpPrefix, eventually, everdictStartArgs, freshDatabase, readinessBudgetMs, freePort } from '@everdict/testkit';
import { deletePrefixTopology } from '../intake/helpers.js';

export { eventually };
export const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');
/** The execution-coordinator alone, as compose runs it. */
export const COORDINATOR = ['execution-coordinator'] as const;

// ------------------------------------------------------------------------------- target HTTP

interface Recorded {
  readonly method: string;
  readonly url: string;
  readonly key: string | undefined;
}

/**
 * A billing service: credits under an Idempotency-Key, receipts by key. A receipt lookup that
 * finds nothing burns the key (a later request with it is refused), which is what makes its 404
 * conclusive — the contract `receipts.conclusive: true` declares.
 */
export class TargetService {
  readonly requests: Recorded[] = [];
  readonly receipts = new Map<string, { accountId: string; amountCents: number; balanceCents: number }>();
  readonly burnt = new Set<string>();
  readonly balances = new Map<string, number>();
  /** Applied credits per account (the effect, counted where it lands). */
  readonly applies = new Map<string, number>();
  /** Accounts whose next credit is applied and then answered by dropping the connection. */
  readonly dropAfterApply = new Set<string>();
  /** While true the receipt lookup answers 503: WhatLanded stays unknown. */
  receiptsDown = false;
  private readonly server = http.createServer((req, res) => this.handle(req, res));
  port = 0;

  async start(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}/api`;
  }

  mutations(account?: string): Recorded[] {
    return this.requests.filter((r) => r.method === 'POST' && (account === undefined || r.url.includes(`/accounts/${account}/`)));
  }

  touching(account: string): Recorded[] {
    return this.requests.filter((r) => r.url.includes(`/accounts/${account}`));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = req.url ?? '';
      const key = typeof req.headers['idempotency-key'] === 'string' ? req.headers['idempotency-key'] : undefined;
      this.requests.push({ method: req.method ?? '', url, key });
      const send = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      let m: RegExpExecArray | null;
      if (req.method === 'GET' && (m = /^\/api\/accounts\/([^/]+)$/.exec(url))) {
        const id = decodeURIComponent(m[1]!);
        const balance = this.balances.get(id);
        return balance === undefined ? send(404, { error: 'no_such_account' }) : send(200, { id, balanceCents: balance });
      }
      if (req.method === 'GET' && (m = /^\/api\/receipts\/([^/]+)$/.exec(url))) {
        const k = decodeURIComponent(m[1]!);
        if (this.receiptsDown) return send(503, { error: 'receipts_unavailable' });
        const receipt = this.receipts.get(k);
        if (receipt) return send(200, receipt);
        this.burnt.add(k);
        return send(404, { error: 'no_receipt' });
      }
      if (req.method === 'POST' && (m = /^\/api\/accounts\/([^/]+)\/credit$/.exec(url))) {
        if (!key) return send(400, { error: 'idempotency_key_required' });
        const prior = this.receipts.get(key);
        if (prior) return send(200, prior);
        if (this.burnt.has(key)) return send(422, { error: 'idempotency_key_burnt' });
        const id = decodeURIComponent(m[1]!);
        const { amountCents } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { amountCents: number };
        const balanceCents = (this.balances.get(id) ?? 0) + amountCents;
        this.balances.set(id, balanceCents);
        this.applies.set(id, (this.applies.get(id) ?? 0) + 1);
        const receipt = { accountId: id, amountCents, balanceCents };
        this.receipts.set(key, receipt);
        if (this.dropAfterApply.delete(id)) return void req.socket.destroy();
        return send(201, receipt);
      }
      send(404, { error: 'no_route' });
    });
  }
}

// ------------------------------------------------------------------------------- target Postgres

/** A target estate database: an entries table with NO unique key, so a second apply would show. */
export async function estateDatabase(label: string): Promise<{ url: string; pool: pg.Pool; entries(entryId: string): Promise<number> }> {
  const d = await freshDatabase(`estate_${label}`);
  const pool = new pg.Pool({ connectionString: d.url, max: 2 });
  await pool.query('CREATE TABLE entries (entry_id text NOT NULL, account text NOT NULL, amount integer NOT NULL)');
  return {
    url: d.url,
    pool,
    async entries(entryId) {
      const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM entries WHERE entry_id = $1', [entryId]);
      return rows[0]!.n;
    },
  };
}

// ------------------------------------------------------------------------------- config

export const TOKENS = {
  alice: 'alice-token-0001', // finance + dba + customer_owner
  bob: 'bob-token-000002', // finance
  carol: 'carol-token-0003', // dba, customer "other" only
  olga: 'olga-token-00004', // operator
  mallory: 'mallory-token-05', // no roles
} as const;

const hashOf = (t: string) => `sha256:${sha256Hex(t)}`;

export function fleetConfig(): FleetConfig {
  return {
    version: 1,
    routes: { r: { adapter: 'scripted', model: 'none', scriptPath: 'none.json' } },
    profiles: { p: { version: '1', route: 'r', prompt: 'effects test' } },
    caseTypes: { t: { rootProfile: 'p', scope: { reads: 'all', writes: ['billing', 'estate'], forbidden: [] } } },
    connectors: agentConnectors(),
    principals: {
      alice: { tokenHash: hashOf(TOKENS.alice), roles: ['finance', 'dba', 'customer_owner'] },
      bob: { tokenHash: hashOf(TOKENS.bob), roles: ['finance'] },
      carol: { tokenHash: hashOf(TOKENS.carol), roles: ['dba'], customers: ['other'] },
      olga: { tokenHash: hashOf(TOKENS.olga), roles: ['operator'] },
      mallory: { tokenHash: hashOf(TOKENS.mallory), roles: [] },
    },
    gatePolicies: {
      payment: { decisions: [{ decision: 'HW-payment', role: 'finance' }] },
      // One operation, two decisions: a DDL decision and a customer-facing one (seed 004 §5).
      ddl: { decisions: [{ decision: 'HW-ddl', role: 'dba' }, { decision: 'H5', role: 'customer_owner' }] },
    },
  };
}

// ------------------------------------------------------------------------------- packets

/** The template hash `writes.propose` pins for a declared write of the fixture's connectors (none for an undeclared one). */
export function pinnedTemplate(connector: 'billing' | 'estate', operation: string, connectors = agentConnectors()): { templateHash?: string } {
  const hash = declaredTemplateHash(connector, connectors[connector]!, operation);
  return hash === undefined ? {} : { templateHash: hash };
}

export function creditPacket(caseId: string, o: { account: string; amountCents: number; planStepId?: string; impactKeys?: string[]; environment?: string; operation?: string; assertions?: EffectCheck[] }): EffectPacket {
  return {
    packetVersion: 1,
    caseId,
    planStepId: o.planStepId ?? `credit-${o.account}`,
    planRevision: 1,
    shapeVersion: '1',
    operation: { connector: 'billing', name: o.operation ?? 'accounts.credit', ...pinnedTemplate('billing', o.operation ?? 'accounts.credit') },
    effectClass: 'payment',
    target: { connector: 'billing', system: 'billing', environment: o.environment ?? 'test' },
    params: { accountId: o.account, amountCents: o.amountCents },
    expectedCounts: {},
    preconditions: [],
    assertions: o.assertions ?? [],
    revert: { kind: 'manual', description: 'debit the same amount by hand' },
    impactKeys: o.impactKeys ?? [`billing:test:${o.account}`],
    summary: `credit ${o.account}`,
  };
}

export function entryPacket(caseId: string, o: { entryId: string; account: string; amount: number }): EffectPacket {
  return {
    packetVersion: 1,
    caseId,
    planStepId: `entry-${o.entryId}`,
    planRevision: 1,
    shapeVersion: '1',
    operation: { connector: 'estate', name: 'entries.add', ...pinnedTemplate('estate', 'entries.add') },
    effectClass: 'ddl',
    target: { connector: 'estate', system: 'ledger-db', environment: 'test' },
    params: { entryId: o.entryId, account: o.account, amount: o.amount },
    expectedCounts: { rows: 1 },
    preconditions: [],
    assertions: [{ id: 'one-entry', read: { operation: 'entries.count', params: { entryId: o.entryId } }, pointer: '/rows/0/n', equals: 1 }],
    revert: { kind: 'manual', description: 'delete the entry by hand' },
    impactKeys: [`estate:test:entry:${o.entryId}`],
  };
}

// ------------------------------------------------------------------------------- agents

/** The variables the fixture's connectors take their endpoints from; `start` sets them. */
export const CONNECTOR_ENV = { billing: 'EFFECTS_BILLING_URL', estate: 'EFFECTS_ESTATE_URL' } as const;

/**
 * The one declaration of the fixture's connectors (the fleet config's `connectors`): the billing
 * target service and the ledger estate, with target identity, parameter bounds, impact-key
 * templates and the requests. Endpoints come from CONNECTOR_ENV, set by `start`.
 */
export function agentConnectors(): NonNullable<FleetConfig['connectors']> {
  return {
    billing: {
      kind: 'http',
      target: { system: 'billing', environment: 'test' },
      baseUrlEnv: CONNECTOR_ENV.billing,
      timeoutMs: 3000,
      receipts: { path: '/receipts/{idempotencyKey}', conclusive: true },
      operations: {
        'accounts.credit': {
          access: 'write',
          effectClass: 'payment',
          method: 'POST',
          path: '/accounts/{accountId}/credit',
          body: { amountCents: '{{amountCents}}' },
          params: { accountId: { type: 'string', maxLength: 64, pattern: '[a-z0-9-]+' }, amountCents: { type: 'integer', minimum: 1, maximum: 1_000_000 } },
          impactKeys: ['billing:test:{accountId}'],
        },
        'accounts.get': { access: 'read', method: 'GET', path: '/accounts/{accountId}', params: { accountId: { type: 'string', maxLength: 64 } } },
      },
    },
    estate: {
      kind: 'postgres',
      target: { system: 'ledger-db', environment: 'test' },
      urlEnv: CONNECTOR_ENV.estate,
      installReceipts: true,
      operations: {
        'entries.add': {
          access: 'write',
          effectClass: 'ddl',
          sql: 'INSERT INTO entries (entry_id, account, amount) VALUES (:entryId, :account, :amount)',
          params: { entryId: { type: 'string', maxLength: 64 }, account: { type: 'string', maxLength: 64 }, amount: { type: 'integer', minimum: 1, maximum: 1_000_000 } },
          expectedRows: 1,
          impactKeys: ['estate:test:entry:{entryId}'],
        },
        'entries.count': { access: 'read', sql: 'SELECT count(*)::int AS n FROM entries WHERE entry_id = :entryId', params: { entryId: { type: 'string', maxLength: 64 } } },
      },
    },
  };
}

/** A scripted `writes__propose` call crediting `account`. */
export function proposeCredit(account: string, amountCents: number, step = `credit-${account}`) {
  return {
    name: 'writes__propose',
    arguments: {
      planStepId: step,
      connector: 'billing',
      operation: 'accounts.credit',
      params: { accountId: account, amountCents },
      summary: `credit ${amountCents} cents to ${account}`,
      revert: { kind: 'manual', description: 'debit the same amount by hand' },
    },
  };
}

// ------------------------------------------------------------------------------- processes

export interface ServiceProc {
  readonly proc: ChildProcess;
  readonly port: number;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
  kill(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}


// ------------------------------------------------------------------------------- the fixture

export interface EffectsFixture {
  readonly db: Db;
  readonly store: Store;
  readonly dbUrl: string;
  readonly prefix: string;
  readonly target: TargetService;
  readonly estate: Awaited<ReturnType<typeof estateDatabase>>;
  readonly dir: string;
  /** Starts `everdict start --service S…` (default gate, execution-coordinator, reconciler) and waits until /readyz answers 200. */
  start(o: { services?: readonly string[]; env?: Record<string, string>; mayCrash?: boolean }): Promise<ServiceProc>;
  /** Opens a case with a root task; returns their ids. */
  openCase(customer?: string): Promise<{ caseId: string; taskId: string }>;
  /** What writes.propose does: the packet paper + `gate.requested` in one unit of work. */
  propose(caseId: string, taskId: string, packet: EffectPacket, o?: ProposeOptions): Promise<{ gateId: string; digest: string }>;
  /** Several proposals committed by ONE unit of work (their `gate.requested` reach the gate together). */
  proposeAll(proposals: readonly { caseId: string; taskId: string; packet: EffectPacket }[]): Promise<{ gateId: string; digest: string }[]>;
  /** POST /v1/gates/:id/decisions on `port`. */
  decide(port: number, token: string, gateId: string, body: Record<string, unknown>): Promise<{ status: number; body: Record<string, unknown> }>;
  get(port: number, token: string, path: string): Promise<{ status: number; body: Record<string, unknown> }>;
  post(port: number, token: string, path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }>;
  waitGate(gateId: string, state?: string): Promise<Record<string, unknown>>;
  dispatchOf(gateId: string): Promise<Record<string, unknown> | undefined>;
  waitDispatch(gateId: string, states: string[], timeoutMs?: number): Promise<Record<string, unknown>>;
  /** Messages the services enqueued (type, payload), in order. */
  outbox(type: string): Promise<Record<string, unknown>[]>;
  ledger(caseId: string): Promise<{ kind: string; body: Record<string, unknown> }[]>;
  close(): Promise<void>;
}

export async function effectsFixture(label: string): Promise<EffectsFixture> {
  const database = await freshDatabase(label);
  const db = createPgDb(database.url, { max: 4 });
  await migrate(db);
  const store = new Store(db);
  const prefix = amqpPrefix(label);
  const target = new TargetService();
  await target.start();
  const estate = await estateDatabase(label);
  const dir = mkdtempSync(join(tmpdir(), `everdict-${label}-`));
  writeFileSync(join(dir, 'fleet.json'), JSON.stringify(fleetConfig(), null, 2));
  const procs: ServiceProc[] = [];

  const request = async (port: number, token: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  const fixture: EffectsFixture = {
    db,
    store,
    dbUrl: database.url,
    prefix,
    target,
    estate,
    dir,

    async start(o) {
      const port = await freePort();
      const services = o.services ?? ['gate', 'execution-coordinator', 'reconciler'];
      const proc = spawn(process.execPath, everdictStartArgs(services), {
        cwd: REPO,
        env: {
          ...process.env,
          DATABASE_URL: database.url,
          AMQP_URL: TEST_AMQP_URL,
          EVERDICT_AMQP_PREFIX: prefix,
          EVERDICT_CONFIG: join(dir, 'fleet.json'),
          [CONNECTOR_ENV.billing]: target.baseUrl,
          [CONNECTOR_ENV.estate]: estate.url,
          EVERDICT_DISPATCH_LEASE_MS: '1500',
          EVERDICT_DISPATCH_POLL_MS: '200',
          EVERDICT_RECONCILE_INTERVAL_MS: '200',
          EVERDICT_RECONCILE_BACKOFF_MS: '100',
          EVERDICT_RECONCILE_BACKOFF_MAX_MS: '1000',
          EVERDICT_RECONCILE_LEASE_MS: '1500',
          PORT: String(port),
          LOG_LEVEL: 'warn',
          ...o.env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      proc.stdout!.on('data', (c: Buffer) => (out += c.toString()));
      proc.stderr!.on('data', (c: Buffer) => (out += c.toString()));
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => proc.on('exit', (code, signal) => r({ code, signal })));
      const handle: ServiceProc = {
        proc,
        port,
        exited,
        output: () => out,
        async kill(signal = 'SIGKILL') {
          if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
          return exited;
        },
      };
      procs.push(handle);
      let gone: { signal: NodeJS.Signals | null } | undefined;
      void exited.then((e) => (gone = e));
      await eventually(
        async () => {
          // A process started with a crash point may reach it before it reports ready.
          if (gone?.signal === 'SIGKILL' && o.mayCrash) return true;
          if (gone) throw new Error(`service exited during start:\n${out.slice(-3000)}`);
          const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
          return res?.status === 200;
        },
        { timeoutMs: readinessBudgetMs(40_000), intervalMs: 100, what: `everdict start ${services.join(' ')} ready` },
      ).catch((err: unknown) => {
        throw new Error(`${String(err)}\n${out.slice(-3000)}`);
      });
      return handle;
    },

    async openCase(customer = 'acme') {
      return store.unitOfWork(async (uow) => {
        const { caseId } = await uow.openCase({ caseType: 't', originKey: `effects:${newId()}`, customer, title: 'effects' });
        const taskId = await uow.createTask({ caseId, profile: 'p' });
        return { caseId, taskId };
      });
    },

    propose: (caseId, taskId, packet, o = {}) => store.unitOfWork((uow) => enqueueProposal(uow, caseId, taskId, packet, o)),
    proposeAll: (proposals) =>
      store.unitOfWork(async (uow) => {
        const out: { gateId: string; digest: string }[] = [];
        for (const p of proposals) out.push(await enqueueProposal(uow, p.caseId, p.taskId, p.packet, {}));
        return out;
      }),

    decide: (port, token, gateId, body) => request(port, token, 'POST', `/v1/gates/${gateId}/decisions`, body),
    get: (port, token, path) => request(port, token, 'GET', path),
    post: (port, token, path, body) => request(port, token, 'POST', path, body),

    async waitGate(gateId, state) {
      return eventually(
        async () => {
          const { rows } = await db.query<Record<string, unknown>>({ text: 'SELECT * FROM gates WHERE id = $1::uuid', values: [gateId] });
          return rows[0] && (state === undefined || rows[0]['state'] === state) ? rows[0] : undefined;
        },
        { timeoutMs: 20_000, what: `gate ${gateId}${state ? ` ${state}` : ''}` },
      );
    },

    async dispatchOf(gateId) {
      const { rows } = await db.query<Record<string, unknown>>({ text: 'SELECT * FROM effect_dispatches WHERE gate_id = $1::uuid', values: [gateId] });
      return rows[0];
    },

    async waitDispatch(gateId, states, timeoutMs = 30_000) {
      return eventually(
        async () => {
          const d = await fixture.dispatchOf(gateId);
          return d && states.includes(String(d['state'])) ? d : undefined;
        },
        { timeoutMs, what: `dispatch of gate ${gateId} in ${states.join('|')}` },
      );
    },

    async outbox(type) {
      const { rows } = await db.query<{ body: Buffer }>({ text: 'SELECT body FROM outbox_messages WHERE type = $1::text ORDER BY seq', values: [type] });
      return rows.map((r) => (JSON.parse(r.body.toString('utf8')) as { payload: Record<string, unknown> }).payload);
    },

    async ledger(caseId) {
      const rows = await store.readLedger(caseId);
      return rows.map((r) => ({ kind: r.kind, body: r.body as Record<string, unknown> }));
    },

    async close() {
      await Promise.all(procs.map((p) => p.kill('SIGKILL')));
      await target.stop();
      await estate.pool.end();
      await db.close();
      await deletePrefixTopology(prefix);
    },
  };
  return fixture;
}

/** Lines of the crash log (one JSON object per SIGKILL the crash points made). */
export function crashLog(path: string): { point: string; grantId?: string }[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { point: string; grantId?: string });
}

interface ProposeOptions {
  gateId?: string;
  callId?: string;
  requiredDecisions?: string[];
  digest?: string;
  expiresAt?: string;
}

/** What writes.propose does, in `uow`: the packet paper + `gate.requested`. */
async function enqueueProposal(uow: UnitOfWork, caseId: string, taskId: string, packet: EffectPacket, o: ProposeOptions): Promise<{ gateId: string; digest: string }> {
  const sealed = sealPacket(packet);
  const gateId = o.gateId ?? newId();
  const paper = await uow.putPaper({ caseId, kind: 'artefact', name: `packets/${gateId}`, schemaId: PACKET_PAPER_SCHEMA, bytes: Buffer.from(canonicalJson(sealed), 'utf8') });
  const envelope = buildEnvelope(
    {
      type: 'gate.requested',
      version: 1,
      caseId,
      lineage: { rootCaseId: caseId, parentTaskId: null, ancestry: [] },
      sender: { service: 'turn-worker', taskId, profile: 'p', profileVersion: '1' },
      trust: 'platform',
      payload: {
        gateId,
        taskId,
        callId: o.callId ?? newId(),
        packetDigest: o.digest ?? sealed.digest,
        packetPaperId: paper.paperId,
        planStepId: packet.planStepId,
        operation: packet.operation.name,
        effectClass: packet.effectClass,
        ...(o.requiredDecisions ? { requiredDecisions: o.requiredDecisions } : {}),
        ...(o.expiresAt ? { expiresAt: o.expiresAt } : {}),
        impactKeys: packet.impactKeys,
        ...(packet.summary ? { summary: packet.summary } : {}),
      },
    },
    systemClock,
  );
  await uow.enqueue({ id: envelope.id, type: envelope.type, caseId }, encodeEnvelope(envelope));
  return { gateId, digest: sealed.digest };
}
