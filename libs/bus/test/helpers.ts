/**
 * Integration fixtures for the bus: a migrated store on its own database, the full topology
 * under the file's own name prefix on the real broker, an admin channel to look into queues,
 * and message builders. Everything a file creates on the broker is deleted when it closes.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import amqplib from 'amqplib';
import type { Channel, ChannelModel } from 'amqplib';
import { buildEnvelope, newId, systemClock } from '@everdict/contracts';
import type { AnyEnvelope, Envelope } from '@everdict/contracts';
import { Store, createPgDb, migrate } from '@everdict/store';
import type { Db } from '@everdict/store';
import { TEST_AMQP_URL, amqpPrefix, freshDatabase } from '@everdict/testkit';
import { connectAmqp } from '../src/amqp.js';
import type { AmqpTransport } from '../src/amqp.js';
import type { BusLogger } from '../src/logger.js';
import type { BusMetrics } from '../src/metrics.js';
import type { MessageHandler, MessageHandlers } from '../src/consumer.js';
import { boundTypes, deleteTopology, loadTopology } from '../src/topology.js';
import type { Topology } from '../src/topology.js';

const run = promisify(execFile);

export interface BusFixture {
  readonly db: Db;
  readonly store: Store;
  readonly dbUrl: string;
  readonly prefix: string;
  readonly topology: Topology;
  /** A plain amqplib channel for inspecting queues (not the code under test). */
  readonly admin: Channel;
  transport(name: string, logger?: BusLogger): Promise<AmqpTransport>;
  close(): Promise<void>;
}

export async function busFixture(label: string): Promise<BusFixture> {
  const info = await freshDatabase(label);
  const db = createPgDb(info.url, { max: 20 });
  await migrate(db);
  await db.query({ text: 'CREATE TABLE effects (message_id uuid NOT NULL, task_id uuid NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())' });
  const prefix = amqpPrefix(label);
  const topology = loadTopology({ prefix });
  const conn: ChannelModel = await amqplib.connect(TEST_AMQP_URL);
  const admin = await conn.createChannel();
  const transports: AmqpTransport[] = [];
  return {
    db,
    store: new Store(db),
    dbUrl: info.url,
    prefix,
    topology,
    admin,
    async transport(name, logger) {
      const t = await connectAmqp({ url: TEST_AMQP_URL, topology, connectionName: `${prefix}-${name}`, reconnectSeconds: 0.2, heartbeatSeconds: 5, ...(logger ? { logger } : {}) });
      transports.push(t);
      return t;
    },
    async close() {
      await Promise.allSettled(transports.map((t) => t.close()));
      await deleteTopology(admin, topology).catch(() => {});
      await conn.close().catch(() => {});
      await db.close();
    },
  };
}

/** A task.runnable envelope for a fresh case and task. */
export function runnable(taskId: string = newId()): Envelope<'task.runnable'> {
  const caseId = newId();
  return buildEnvelope(
    {
      type: 'task.runnable',
      version: 1,
      caseId,
      lineage: { rootCaseId: caseId, parentTaskId: null, ancestry: [] },
      sender: { service: 'intake', taskId: null, profile: null, profileVersion: null },
      trust: 'platform',
      payload: { taskId, reason: 'opened' },
    },
    systemClock,
  );
}

/** The test handler's state change: one effect row per applied message. */
export async function recordEffect(env: AnyEnvelope, uow: { query: Db['query'] }): Promise<void> {
  const taskId = 'taskId' in env.payload ? String(env.payload.taskId) : newId();
  await uow.query({ name: 'test_insert_effect', text: 'INSERT INTO effects (message_id, task_id) VALUES ($1::uuid, $2::uuid)', values: [env.id, taskId] });
}

/** Counting metrics sink. */
export function countingMetrics(): BusMetrics & { counts: Map<string, number>; get(key: string): number } {
  const counts = new Map<string, number>();
  const inc = (k: string, n = 1) => counts.set(k, (counts.get(k) ?? 0) + n);
  return {
    counts,
    get: (k) => counts.get(k) ?? 0,
    published: (t, n = 1) => inc(`published:${t}`, n),
    confirmed: (n = 1) => inc('confirmed', n),
    consumed: (c, o) => inc(`consumed:${o}`),
    duplicate: () => inc('duplicate'),
    refused: (c, r) => inc(`refused:${r}`),
    deadLettered: (c, r) => inc(`dead:${r}`),
    outboxLag: () => inc('lag_reports'),
    handlerSeconds: () => {},
  };
}

/** A logger that remembers messages (for asserting that a disconnect really happened). */
export function recordingLogger(): BusLogger & { lines: { level: string; msg: string; obj: Record<string, unknown> }[] } {
  const lines: { level: string; msg: string; obj: Record<string, unknown> }[] = [];
  const at = (level: string) => (obj: Record<string, unknown>, msg: string) => void lines.push({ level, msg, obj });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/** Drains a queue with basic.get, acking everything; returns the messages. */
export async function drainQueue(ch: Channel, queue: string): Promise<amqplib.GetMessage[]> {
  const out: amqplib.GetMessage[] = [];
  for (;;) {
    const m = await ch.get(queue, { noAck: true });
    if (m === false) return out;
    out.push(m);
  }
}

export async function countRows(db: Db, sql: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>({ text: sql });
  return Number(rows[0]?.n ?? 0);
}

/**
 * Forcibly closes this test's own broker connections (those whose connection_name starts with
 * `prefix`) with `rabbitmqctl close_connection`: the same server-side close as
 * close_all_connections, without tearing down the connections of test files running alongside.
 * Returns how many connections were closed.
 */
export async function closeBrokerConnections(prefix: string): Promise<number> {
  const { stdout } = await run('rabbitmqctl', ['list_connections', 'pid', 'client_properties', '-q', '--no-table-headers']);
  const pids = stdout
    .split('\n')
    .filter((line) => line.includes(`{"connection_name","${prefix}`))
    .map((line) => line.split('\t')[0]!)
    .filter((pid) => pid.startsWith('<'));
  await Promise.all(pids.map((pid) => run('rabbitmqctl', ['close_connection', pid, 'test: forced close'])));
  return pids.length;
}

export function shuffle<T>(items: T[], seed = 42): T[] {
  // Deterministic shuffle (mulberry32), so a failing order can be replayed.
  let s = seed >>> 0;
  const rand = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const a = [...items];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

/** The same handler for every message type bound to a service's queue. */
export function handlersFor(topology: Topology, service: string, fn: MessageHandler): MessageHandlers {
  return Object.fromEntries(boundTypes(topology, service).map((t) => [t, fn])) as MessageHandlers;
}
