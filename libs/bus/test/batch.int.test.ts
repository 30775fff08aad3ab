/**
 * The consumer's batched mode (`batchSize` > 1): deliveries ready together share one unit of
 * work, and the per-delivery contract still holds — each is applied exactly once whatever the
 * copies and order, a known id is a duplicate and a different hash under it a refusal, a failing
 * handler sinks only its own delivery (the batch is rolled back and every delivery processed
 * again alone), and `ctx.afterCommit` runs once per delivery whose unit of work committed, never
 * for a rolled-back attempt. Real Postgres, in-process transport; the same redelivery storm through
 * RabbitMQ, batched and not, is in storm.int.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { payloadHash } from '@everdict/contracts';
import type { AnyEnvelope } from '@everdict/contracts';
import { Store, createPgDb, migrate } from '@everdict/store';
import type { Db } from '@everdict/store';
import { freshDatabase } from '@everdict/testkit';
import { InboxConsumer } from '../src/consumer.js';
import type { MessageHandler } from '../src/consumer.js';
import { InProcessTransport } from '../src/inprocess.js';
import { deadLetterQueue, deliveryLimit, loadTopology } from '../src/topology.js';
import { publishEnvelope } from '../src/transport.js';
import { countRows, countingMetrics, handlersFor, recordEffect, runnable, shuffle } from './helpers.js';

/** Store metrics that count committed, rolled-back and duplicate units of work. */
function countingStoreMetrics() {
  const m = {
    commits: 0,
    rollbacks: 0,
    duplicates: 0,
    transaction(outcome: 'commit' | 'rollback' | 'duplicate') {
      if (outcome === 'commit') m.commits++;
      else if (outcome === 'duplicate') m.duplicates++;
      else m.rollbacks++;
    },
    staleFence() {},
  };
  return m;
}

describe('batched inbox consumer (in-process transport)', () => {
  let db: Db;
  const topology = loadTopology();
  const dlq = deadLetterQueue(topology, 'turn-worker');

  beforeAll(async () => {
    db = createPgDb((await freshDatabase('bus batch')).url, { max: 10 });
    await migrate(db);
    await db.query({ text: 'CREATE TABLE effects (message_id uuid NOT NULL, task_id uuid NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())' });
  });
  afterAll(async () => {
    await db?.close();
  });

  async function setup(handler: MessageHandler, beforeBatch?: ConstructorParameters<typeof InboxConsumer>[0]['beforeBatch']) {
    await db.query({ text: 'TRUNCATE effects, inbox_messages, dead_letters, outbox_messages' });
    const storeMetrics = countingStoreMetrics();
    const store = new Store(db, { metrics: storeMetrics });
    const transport = new InProcessTransport(topology);
    const metrics = countingMetrics();
    const consumer = new InboxConsumer({ store, transport, service: 'turn-worker', prefetch: 64, batchSize: 32, retryDelayMs: 1, metrics, handlers: handlersFor(topology, 'turn-worker', handler), ...(beforeBatch ? { beforeBatch } : {}) });
    await consumer.start();
    return { transport, metrics, consumer, storeMetrics };
  }

  it('applies each message once, in fewer units of work than messages, and runs afterCommit once per applied message', async () => {
    const committed: string[] = [];
    const { transport, metrics, consumer, storeMetrics } = await setup(async (env, uow, ctx) => {
      await recordEffect(env, uow);
      ctx.afterCommit?.(() => committed.push(env.id));
    });
    const messages = Array.from({ length: 200 }, () => runnable());
    const publishes = shuffle([...messages, ...messages.slice(0, 50)], 7);
    await Promise.all(publishes.map((m) => publishEnvelope(transport, m)));

    const { rows } = await db.query<{ message_id: string }>({ text: 'SELECT message_id FROM effects' });
    expect(rows).toHaveLength(200);
    expect(new Set(rows.map((r) => r.message_id))).toEqual(new Set(messages.map((m) => m.id)));
    expect(committed.sort()).toEqual(messages.map((m) => m.id).sort());
    expect(metrics.get('consumed:applied')).toBe(200);
    expect(metrics.get('duplicate')).toBe(50);
    expect(storeMetrics.rollbacks).toBe(0);
    // A redelivery that met its first delivery's committed row failed its batch's plain insert
    // (one 'duplicate' attempt), the batch ran again skipping it, and it was settled alone.
    expect(storeMetrics.duplicates).toBeLessThanOrEqual(100);
    // 250 deliveries, 64 in flight at a time: they shared units of work.
    expect(storeMetrics.commits).toBeLessThan(200);
    await consumer.stop();
    await transport.close();
  });

  it('beforeBatch runs in the batch unit of work, before its handlers, with each new delivery once; a failing one sends the batch alone', async () => {
    await db.query({ text: 'CREATE TABLE IF NOT EXISTS seen (message_id uuid NOT NULL)' });
    await db.query({ text: 'TRUNCATE seen' });
    const passed: string[] = [];
    let failNext = true;
    const { transport, metrics, consumer } = await setup(
      async (env, uow) => {
        // The delivery's handler runs after beforeBatch wrote its row, in the same transaction.
        const { rows } = await uow.query<{ n: number }>({ text: 'SELECT count(*)::int AS n FROM seen WHERE message_id = $1::uuid', values: [env.id] });
        await uow.query({ text: 'INSERT INTO effects (message_id, task_id) VALUES ($1::uuid, $2::uuid)', values: [env.id, rows[0]!.n === 1 ? env.id : '00000000-0000-7000-8000-000000000000'] });
      },
      async (fresh, uow) => {
        for (const env of fresh) await uow.query({ text: 'INSERT INTO seen (message_id) VALUES ($1::uuid)', values: [env.id] });
        if (failNext) {
          failNext = false;
          throw new Error('beforeBatch failed');
        }
        passed.push(...fresh.map((e) => e.id));
      },
    );
    const messages = Array.from({ length: 120 }, () => runnable());
    await Promise.all(shuffle([...messages, ...messages.slice(0, 30)], 11).map((m) => publishEnvelope(transport, m)));

    expect(metrics.get('consumed:applied')).toBe(120);
    expect(passed.length).toBeGreaterThan(0);
    expect(new Set(passed).size).toBe(passed.length); // never a delivery recorded already
    // Exactly the deliveries of committed batches have a seen row, and their handlers saw it.
    const { rows } = await db.query<{ message_id: string; task_id: string }>({ text: 'SELECT message_id, task_id FROM effects' });
    expect(rows).toHaveLength(120);
    expect(new Set(rows.filter((r) => r.task_id === r.message_id).map((r) => r.message_id))).toEqual(new Set(passed));
    expect(await countRows(db, 'SELECT count(*) AS n FROM seen')).toBe(passed.length);
    await consumer.stop();
    await transport.close();
  });

  it('a failing handler sinks only its own delivery; the rolled-back attempts leave no afterCommit behind', async () => {
    const poison = runnable();
    const good = Array.from({ length: 20 }, () => runnable());
    const runs = new Map<string, number>();
    const committed: string[] = [];
    const { transport, metrics, consumer, storeMetrics } = await setup(async (env, uow, ctx) => {
      runs.set(env.id, (runs.get(env.id) ?? 0) + 1);
      await recordEffect(env, uow);
      ctx.afterCommit?.(() => committed.push(env.id));
      if (env.id === poison.id) throw new Error('handler bug');
    });
    await Promise.all([poison, ...good].map((m) => publishEnvelope(transport, m)));

    const limit = deliveryLimit(topology, 'turn-worker');
    expect(transport.held(dlq).map((m) => m.messageId)).toEqual([poison.id]);
    const { rows } = await db.query<{ message_id: string }>({ text: 'SELECT message_id FROM effects' });
    expect(new Set(rows.map((r) => r.message_id))).toEqual(new Set(good.map((m) => m.id)));
    expect(rows).toHaveLength(good.length);
    expect(committed.sort()).toEqual(good.map((m) => m.id).sort());
    expect(runs.get(poison.id)).toBeGreaterThanOrEqual(limit + 1);
    expect(storeMetrics.rollbacks).toBeGreaterThan(0);
    expect(await countRows(db, "SELECT count(*) AS n FROM dead_letters WHERE reason = 'handler_failed'")).toBe(1);
    expect(await countRows(db, 'SELECT count(*) AS n FROM inbox_messages')).toBe(good.length);
    expect(metrics.get('consumed:applied')).toBe(good.length);
    await consumer.stop();
    await transport.close();
  });

  it('records an ignored disposition, and refuses a different payload under a known id', async () => {
    const ignoredIds = new Set<string>();
    const { transport, metrics, consumer } = await setup(async (env, uow) => {
      if (ignoredIds.has(env.id)) return 'ignored';
      await recordEffect(env, uow);
      return 'applied';
    });
    const a = runnable();
    const b = runnable();
    ignoredIds.add(b.id);
    await Promise.all([publishEnvelope(transport, a), publishEnvelope(transport, b)]);
    const payload = { ...a.payload, reason: 'woken' as const };
    const forged: AnyEnvelope = { ...a, payload, payloadHash: payloadHash(payload) };
    await Promise.all([publishEnvelope(transport, forged), publishEnvelope(transport, runnable())]);

    const { rows } = await db.query<{ message_id: string; disposition: string }>({ text: 'SELECT message_id, disposition FROM inbox_messages ORDER BY disposition' });
    expect(rows.find((r) => r.message_id === b.id)?.disposition).toBe('ignored');
    expect(rows.find((r) => r.message_id === a.id)?.disposition).toBe('applied');
    expect(rows).toHaveLength(3);
    expect(metrics.get('refused:hash_conflict')).toBe(1);
    expect(transport.held(dlq).map((m) => m.messageId)).toEqual([a.id]);
    expect(await countRows(db, 'SELECT count(*) AS n FROM effects')).toBe(2);
    await consumer.stop();
    await transport.close();
  });
});
