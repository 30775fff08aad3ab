/**
 * Issue 12 item 1, authenticated producers, on the shared RabbitMQ with one broker user per
 * service (created for this test with exactly the permissions of infra/rabbitmq, deleted after)
 * and a real Postgres database:
 * - each service's relay publishes only the rows its service enqueued, stamped with its user;
 * - another service's credentials cannot publish a type that service does not emit (the broker's
 *   topic permission refuses it) nor pose as another user (`user_id` validated by the broker);
 * - a message whose claimed `sender.service` is not its authenticated producer, or that carries
 *   no user at all, is dead-lettered by the consumer, recorded and counted, and its handler never
 *   runs: no inbox row, nothing applied.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import amqplib from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PRODUCING_SERVICES, buildEnvelope, encodeEnvelope, newId, sha256Hex, systemClock } from '@everdict/contracts';
import type { AnyEnvelope, FleetConfig, MessageType, SenderService } from '@everdict/contracts';
import {
  InboxConsumer,
  OutboxRelay,
  boundTypes,
  connectAmqp,
  connectAmqpPerService,
  deadLetterQueue,
  deleteTopology,
  eventsExchange,
  loadTopology,
  perServiceIdentity,
  servicePermissions,
} from '@everdict/bus';
import type { BusMetrics, MessageHandlers, PerServiceTransport } from '@everdict/bus';
import { Store, createPgDb, enqueuePlatformMessage, migrate } from '@everdict/store';
import type { Db } from '@everdict/store';
import { amqpPrefix, createBrokerUsers, everdictStartArgs, eventually, freePort, freshDatabase, readinessBudgetMs, TEST_AMQP_URL } from '@everdict/testkit';
import type { BrokerUsers } from '@everdict/testkit';

const prefix = amqpPrefix('producers');
const topology = loadTopology({ prefix });
const userOf = usersFor(prefix);
const identity = perServiceIdentity(userOf);
const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');

function usersFor(p: string): Record<string, string> {
  return Object.fromEntries(PRODUCING_SERVICES.map((s) => [s, `${p}-${s}`]));
}

/** The operator's part for `p`: the topology (as the definitions import declares it) and one user per service. */
async function brokerFor(p: string): Promise<{ users: BrokerUsers; close(): Promise<void> }> {
  const t = loadTopology({ prefix: p });
  const admin = await connectAmqp({ url: TEST_AMQP_URL, topology: t, connectionName: `${p}-admin` });
  await admin.close();
  const users = await createBrokerUsers(PRODUCING_SERVICES.map((s) => ({ name: `${p}-${s}`, ...servicePermissions(t, s) })));
  return {
    users,
    async close() {
      await users.remove();
      const conn = await amqplib.connect(TEST_AMQP_URL);
      const ch = await conn.createChannel();
      await deleteTopology(ch, t).catch(() => {});
      await conn.close().catch(() => {});
    },
  };
}

function counting(): BusMetrics & { get(k: string): number } {
  const counts = new Map<string, number>();
  const inc = (k: string) => counts.set(k, (counts.get(k) ?? 0) + 1);
  return {
    get: (k) => counts.get(k) ?? 0,
    published: () => {},
    confirmed: () => {},
    consumed: (_c, o) => inc(`consumed:${o}`),
    duplicate: () => {},
    refused: (_c, r) => inc(`refused:${r}`),
    deadLettered: (_c, r) => inc(`dead:${r}`),
    outboxLag: () => {},
    handlerSeconds: () => {},
  };
}

function envelope(type: MessageType, sender: SenderService, payload: Record<string, unknown>): AnyEnvelope {
  const caseId = newId();
  return buildEnvelope(
    { type, version: 1, caseId, lineage: { rootCaseId: caseId, parentTaskId: null, ancestry: [] }, sender: { service: sender, taskId: null, profile: null, profileVersion: null }, trust: 'platform', payload } as never,
    systemClock,
  ) as AnyEnvelope;
}

describe('authenticated producers (per-service broker users)', () => {
  let db: Db;
  let store: Store;
  let broker: { users: BrokerUsers; close(): Promise<void> };
  let users: BrokerUsers;
  let worker: PerServiceTransport;
  let consumer: InboxConsumer;
  const metrics = counting();
  const handled: string[] = [];
  const urlOf = (service: string) => `amqp://${encodeURIComponent(userOf[service]!)}:${encodeURIComponent(users.passwords[userOf[service]!]!)}@127.0.0.1:5672`;

  /** Publishes raw bytes with `service`'s credentials; resolves 'confirmed' or the broker's refusal. */
  async function publishAs(service: string, env: AnyEnvelope, props: { userId?: string | undefined }): Promise<string> {
    const conn = await amqplib.connect(urlOf(service));
    conn.on('error', () => {});
    try {
      const ch = await conn.createConfirmChannel();
      return await new Promise<string>((resolve) => {
        ch.on('error', (err: Error) => resolve(err.message));
        ch.on('close', () => resolve('channel closed'));
        ch.publish(eventsExchange(topology), env.type, encodeEnvelope(env), { persistent: true, messageId: env.id, type: env.type, contentType: 'application/json', ...(props.userId ? { userId: props.userId } : {}) }, (err) =>
          resolve(err ? `nacked: ${String(err)}` : 'confirmed'),
        );
      });
    } finally {
      await conn.close().catch(() => {});
    }
  }

  async function deadLetter(messageId: string): Promise<{ reason: string; detail: string } | undefined> {
    const { rows } = await db.query<{ reason: string; detail: string }>({ text: 'SELECT reason, detail FROM dead_letters WHERE message_id = $1::text', values: [messageId] });
    return rows[0];
  }

  async function inboxRows(messageId: string): Promise<number> {
    const { rows } = await db.query<{ n: number }>({ text: 'SELECT count(*)::int AS n FROM inbox_messages WHERE message_id = $1::uuid', values: [messageId] });
    return rows[0]!.n;
  }

  beforeAll(async () => {
    const fresh = await freshDatabase('producers');
    db = createPgDb(fresh.url, { max: 4 });
    await migrate(db);
    store = new Store(db);
    broker = await brokerFor(prefix);
    users = broker.users;
    // The turn-worker consumes its queue as its own user.
    worker = await connectAmqpPerService({ topology, identity, urls: { 'turn-worker': urlOf('turn-worker') }, connectionName: `${prefix}-tw` });
    const record = async (e: AnyEnvelope) => void handled.push(e.id);
    const handlers = Object.fromEntries(boundTypes(topology, 'turn-worker').map((t) => [t, record])) as MessageHandlers;
    consumer = new InboxConsumer({ store, transport: worker, service: 'turn-worker', handlers, metrics, retryDelayMs: 10 });
    await consumer.start();
  });

  afterAll(async () => {
    await consumer?.stop().catch(() => {});
    await worker?.close().catch(() => {});
    await broker?.close();
    await db?.close();
  });

  it("publishes each row under its producer's own user: a relay holding only intake's credentials leaves the gate's rows alone", async () => {
    const taskFromIntake = newId();
    const taskFromGate = newId();
    const [fromIntake, fromGate] = await store.unitOfWork(async (uow) => [
      await enqueuePlatformMessage(uow, 'intake', 'task.runnable', newId(), { taskId: taskFromIntake, reason: 'opened' }),
      await enqueuePlatformMessage(uow, 'gate', 'task.runnable', newId(), { taskId: taskFromGate, reason: 'decided' }),
    ]);
    const intake = await connectAmqpPerService({ topology, identity, urls: { intake: urlOf('intake') }, connectionName: `${prefix}-intake` });
    const intakeRelay = new OutboxRelay({ store, transport: intake, name: 'intake-relay', producers: ['intake'] });
    try {
      expect(await intakeRelay.pumpOnce()).toMatchObject({ claimed: 1, published: 1, failed: 0 });
      await eventually(() => handled.includes(fromIntake), { what: "intake's task.runnable applied" });
      const unpublished = await db.query<{ message_id: string }>({ text: 'SELECT message_id FROM outbox_messages WHERE published_at IS NULL' });
      expect(unpublished.rows.map((r) => r.message_id)).toEqual([fromGate]);
    } finally {
      await intake.close();
    }
    const gate = await connectAmqpPerService({ topology, identity, urls: { gate: urlOf('gate') }, connectionName: `${prefix}-gate` });
    try {
      expect(await new OutboxRelay({ store, transport: gate, name: 'gate-relay', producers: ['gate'] }).pumpOnce()).toMatchObject({ claimed: 1, published: 1 });
      await eventually(() => handled.includes(fromGate), { what: "the gate's task.runnable applied" });
    } finally {
      await gate.close();
    }
    expect(metrics.get('consumed:refused')).toBe(0);
  });

  it("refuses at the broker a type the credentials' service does not emit, and a user_id that is not the connection's", async () => {
    // The coordinator's credentials publishing a gate verdict: topic permission denies the routing key.
    const verdict = envelope('gate.decided', 'gate', { gateId: newId(), taskId: newId(), packetDigest: `sha256:${'a'.repeat(64)}`, outcome: 'rejected', reason: 'forged' });
    expect(await publishAs('execution-coordinator', verdict, { userId: userOf['execution-coordinator'] })).toMatch(/ACCESS_REFUSED/);
    // Intake's credentials posing as the gate's user.
    const posing = envelope('task.runnable', 'gate', { taskId: newId(), reason: 'decided' });
    expect(await publishAs('intake', posing, { userId: userOf['gate'] })).toMatch(/PRECONDITION_FAILED/);
    // Give a wrongly routed message time to arrive, then: nothing reached the handler or the inbox.
    const probe = envelope('task.runnable', 'intake', { taskId: newId(), reason: 'opened' });
    expect(await publishAs('intake', probe, { userId: userOf['intake'] })).toBe('confirmed');
    await eventually(() => handled.includes(probe.id), { what: 'the probe behind them applied' });
    expect(handled).not.toContain(verdict.id);
    expect(handled).not.toContain(posing.id);
    expect(await inboxRows(verdict.id)).toBe(0);
    expect(await inboxRows(posing.id)).toBe(0);
  });

  it('dead-letters, records and counts a claimed sender that is not the authenticated producer, and a message with no user', async () => {
    // Intake's credentials (it may publish task.cancel and budget.topped_up) claiming other senders.
    const cancel = envelope('task.cancel', 'turn-worker', { taskId: newId(), mode: 'hard', requestedBy: 'mallory' });
    const topUp = envelope('budget.topped_up', 'operator', { taskId: newId(), budget: { maxTurns: 100 }, toppedUpBy: 'mallory' });
    const anonymous = envelope('task.runnable', 'intake', { taskId: newId(), reason: 'opened' });
    expect(await publishAs('intake', cancel, { userId: userOf['intake'] })).toBe('confirmed');
    expect(await publishAs('intake', topUp, { userId: userOf['intake'] })).toBe('confirmed');
    expect(await publishAs('intake', anonymous, { userId: undefined })).toBe('confirmed');

    const refusedCancel = await eventually(() => deadLetter(cancel.id), { what: 'the forged cancel recorded' });
    expect(refusedCancel).toMatchObject({ reason: 'sender_mismatch', detail: expect.stringContaining('/sender/service turn-worker') });
    expect(await eventually(() => deadLetter(topUp.id), { what: 'the forged top-up recorded' })).toMatchObject({ reason: 'sender_mismatch' });
    expect(await eventually(() => deadLetter(anonymous.id), { what: 'the anonymous message recorded' })).toMatchObject({ reason: 'producer_unauthenticated' });
    expect(metrics.get('refused:sender_mismatch')).toBe(2);
    expect(metrics.get('dead:sender_mismatch')).toBe(2);
    expect(metrics.get('refused:producer_unauthenticated')).toBe(1);

    // State unchanged: no handler ran, no inbox row; the three sit in the dead-letter queue.
    for (const e of [cancel, topUp, anonymous]) {
      expect(handled).not.toContain(e.id);
      expect(await inboxRows(e.id)).toBe(0);
    }
    const conn = await amqplib.connect(TEST_AMQP_URL);
    try {
      const ch = await conn.createChannel();
      await eventually(async () => (await ch.checkQueue(deadLetterQueue(topology, 'turn-worker'))).messageCount === 3, { what: 'three dead letters' });
    } finally {
      await conn.close();
    }
  });
});

describe('a fleet of per-service users: intake on one node, the other four on another', () => {
  const p = amqpPrefix('producers_fleet');
  const names = usersFor(p);
  const TOKEN = 'producers-fleet-agent-token-01';
  let broker: { users: BrokerUsers; close(): Promise<void> };
  let db: Db;
  const nodes: { proc: ChildProcess; port: number; out: () => string; exited: () => boolean }[] = [];

  const config = (): FleetConfig => ({
    version: 1,
    routes: { r: { adapter: 'scripted', model: 'script-r', scriptPath: 'r.json' } },
    tools: { lookup: { builtin: 'static', description: 'Look something up.', output: 'the answer is 42' } },
    profiles: { p: { version: '1', route: 'r', prompt: 'Answer the ticket.', tools: ['lookup'] } },
    caseTypes: { ticket: { rootProfile: 'p', scope: { reads: 'all', writes: [], forbidden: [] } } },
    principals: { acme: { tokenHash: `sha256:${sha256Hex(TOKEN)}`, roles: ['customer'], customers: ['acme'] } },
  });

  async function startNode(services: readonly string[], env: Record<string, string>): Promise<(typeof nodes)[number]> {
    const port = await freePort();
    const proc = spawn(process.execPath, everdictStartArgs(services), { cwd: REPO, env: { ...process.env, ...env, PORT: String(port), LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let gone = false;
    const keep = (b: Buffer) => (out = (out + b.toString('utf8')).slice(-100_000));
    proc.stdout!.on('data', keep);
    proc.stderr!.on('data', keep);
    proc.once('exit', () => (gone = true));
    const node = { proc, port, out: () => out, exited: () => gone };
    nodes.push(node);
    await eventually(
      async () => {
        if (gone) throw new Error(`node ${services.join('+')} exited during start:\n${out.slice(-3000)}`);
        return (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null))?.status === 200;
      },
      { timeoutMs: readinessBudgetMs(), intervalMs: 100, what: `node ${services.join('+')} ready` },
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${out.slice(-3000)}`);
    });
    return node;
  }

  async function metric(port: number, name: string, labels: Record<string, string>): Promise<number> {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    let sum = 0;
    for (const line of text.split('\n')) {
      const m = /^([a-z_]+)(\{[^}]*\})?\s+([0-9.eE+-]+)$/.exec(line);
      if (m && m[1] === name && Object.entries(labels).every(([k, v]) => (m[2] ?? '').includes(`${k}="${v}"`))) sum += Number(m[3]);
    }
    return sum;
  }

  beforeAll(async () => {
    broker = await brokerFor(p);
    const fresh = await freshDatabase('producers_fleet');
    db = createPgDb(fresh.url, { max: 2 });
    await migrate(db);
    const dir = mkdtempSync(join(tmpdir(), 'ev-producers-fleet-'));
    writeFileSync(join(dir, 'fleet.json'), JSON.stringify(config()));
    writeFileSync(join(dir, 'r.json'), JSON.stringify({ steps: [{ toolCalls: [{ name: 'lookup', arguments: {} }] }, { text: 'done: 42' }] }));
    const pw = (s: string) => broker.users.passwords[names[s]!]!;
    writeFileSync(join(dir, 'intake.pw'), `${pw('intake')}\n`, { mode: 0o600 });
    const common = {
      DATABASE_URL: fresh.url,
      // The host only: every service logs in as its own user (EVERDICT_AMQP_USERS).
      AMQP_URL: 'amqp://127.0.0.1:5672',
      EVERDICT_AMQP_USERS: PRODUCING_SERVICES.map((s) => `${s}=${names[s]}`).join(','),
      EVERDICT_CONFIG: join(dir, 'fleet.json'),
      EVERDICT_AMQP_PREFIX: p,
    };
    await startNode(['intake'], { ...common, EVERDICT_AMQP_PASSWORD_INTAKE_FILE: join(dir, 'intake.pw') });
    await startNode(['turn-worker', 'gate', 'execution-coordinator', 'reconciler'], {
      ...common,
      EVERDICT_AMQP_PASSWORD_TURN_WORKER: pw('turn-worker'),
      EVERDICT_AMQP_PASSWORD_GATE: pw('gate'),
      EVERDICT_AMQP_PASSWORD_EXECUTION_COORDINATOR: pw('execution-coordinator'),
      EVERDICT_AMQP_PASSWORD_RECONCILER: pw('reconciler'),
    });
  }, 120_000 + 2 * readinessBudgetMs());

  afterAll(async () => {
    for (const n of nodes) if (!n.exited()) n.proc.kill('SIGTERM');
    await eventually(() => nodes.every((n) => n.exited()), { timeoutMs: 15_000, what: 'nodes exit' }).catch(() => nodes.forEach((n) => n.proc.kill('SIGKILL')));
    await broker?.close();
    await db?.close();
  });

  it("runs a case end to end over the services' own users, and counts a forged sender on the real node", async () => {
    const [intake, workers] = [nodes[0]!, nodes[1]!];
    const res = await fetch(`http://127.0.0.1:${intake.port}/v1/cases`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'idempotency-key': 'producers-1' },
      body: JSON.stringify({ caseType: 'ticket', title: 'per-service users' }),
    });
    expect(res.status).toBe(201);
    const { caseId } = (await res.json()) as { caseId: string };
    const state = async () => (await db.query<{ state: string }>({ text: 'SELECT state FROM tasks WHERE case_id = $1::uuid', values: [caseId] })).rows[0]?.state;
    await eventually(async () => (await state()) === 'done', { timeoutMs: 60_000, intervalMs: 200, what: 'the case task done' }).catch(async (err: unknown) => {
      throw new Error(`${String(err)}: ${await state()}\n${intake.out().slice(-2000)}\n${workers.out().slice(-3000)}`);
    });
    // Every row went out under its producer's user: nothing left unpublished.
    // (The task's last rows commit with `done`; their relay publishes them a moment later.)
    const unpublished = async () => (await db.query<{ type: string; sender: string }>({ text: "SELECT type, convert_from(body, 'UTF8')::jsonb #>> '{sender,service}' AS sender FROM outbox_messages WHERE published_at IS NULL" })).rows;
    await eventually(async () => (await unpublished()).length === 0, { timeoutMs: 10_000, intervalMs: 100, what: 'every outbox row published' }).catch(async (err: unknown) => {
      throw new Error(`${String(err)}: ${JSON.stringify(await unpublished())}`);
    });

    // Intake's credentials, posing as the turn-worker finishing the task.
    const { rows } = await db.query<{ id: string }>({ text: 'SELECT id FROM tasks WHERE case_id = $1::uuid', values: [caseId] });
    const taskId = rows[0]!.id;
    const forged = envelope('task.finished', 'turn-worker', { taskId, parentTaskId: null, outcome: 'done', summary: 'forged' });
    const conn = await amqplib.connect(`amqp://${encodeURIComponent(names['intake']!)}:${encodeURIComponent(broker.users.passwords[names['intake']!]!)}@127.0.0.1:5672`);
    try {
      const ch = await conn.createConfirmChannel();
      await new Promise<void>((ok, fail) => ch.publish(`${p}.events`, 'task.runnable', encodeEnvelope(forged), { persistent: true, messageId: forged.id, userId: names['intake'] }, (err) => (err ? fail(err) : ok())));
    } finally {
      await conn.close().catch(() => {});
    }
    await eventually(async () => (await metric(workers.port, 'everdict_bus_refused_total', { consumer: 'turn-worker', reason: 'sender_mismatch' })) === 1, { timeoutMs: 20_000, what: 'the forged sender counted' });
    const dead = await db.query<{ reason: string }>({ text: 'SELECT reason FROM dead_letters WHERE message_id = $1::text', values: [forged.id] });
    expect(dead.rows).toEqual([{ reason: 'sender_mismatch' }]);
    expect(await state()).toBe('done');
  });
});
