/**
 * The in-process transport (embedded mode) runs the SAME consumer pipeline: duplicates are
 * absorbed by the inbox, a different payload under a known id is refused and dead-lettered, a
 * failing handler dead-letters after the queue's delivery limit, and the relay drives it exactly
 * as it drives RabbitMQ. Real Postgres, no broker.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeEnvelope, payloadHash } from '@everdict/contracts';
import { Store, createPgDb, migrate } from '@everdict/store';
import type { Db } from '@everdict/store';
import { eventually, freshDatabase } from '@everdict/testkit';
import { InboxConsumer } from '../src/consumer.js';
import { InProcessTransport } from '../src/inprocess.js';
import { OutboxRelay } from '../src/relay.js';
import { deadLetterQueue, deliveryLimit, loadTopology } from '../src/topology.js';
import { publishEnvelope } from '../src/transport.js';
import type { Transport } from '../src/transport.js';
import { countRows, countingMetrics, handlersFor, recordEffect, runnable } from './helpers.js';

describe('in-process transport', () => {
  let db: Db;
  let store: Store;
  const topology = loadTopology();
  const dlq = deadLetterQueue(topology, 'turn-worker');

  beforeAll(async () => {
    db = createPgDb((await freshDatabase('bus inprocess')).url, { max: 10 });
    await migrate(db);
    await db.query({ text: 'CREATE TABLE effects (message_id uuid NOT NULL, task_id uuid NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())' });
    store = new Store(db);
  });
  afterAll(async () => {
    await db?.close();
  });

  async function setup(onMessage?: (id: string, attempt: number) => void) {
    await db.query({ text: 'TRUNCATE effects, inbox_messages, dead_letters, outbox_messages' });
    const transport = new InProcessTransport(topology);
    const metrics = countingMetrics();
    const consumer = new InboxConsumer({
      store,
      transport,
      service: 'turn-worker',
      prefetch: 8,
      retryDelayMs: 1,
      metrics,
      handlers: handlersFor(topology, 'turn-worker', async (env, uow, ctx) => {
        await recordEffect(env, uow);
        onMessage?.(env.id, ctx.deliveryCount);
      }),
    });
    await consumer.start();
    return { transport, metrics, consumer };
  }

  it('applies a message delivered twice once, and confirms only after the unit of work committed', async () => {
    const { transport, metrics, consumer } = await setup();
    const m = runnable();
    await publishEnvelope(transport, m);
    // Confirm-on-settle: by the time publish resolved, the effect is committed.
    expect(await countRows(db, 'SELECT count(*) AS n FROM effects')).toBe(1);
    await publishEnvelope(transport, m);
    expect(await countRows(db, 'SELECT count(*) AS n FROM effects')).toBe(1);
    expect(metrics.get('duplicate')).toBe(1);
    expect(metrics.get('consumed:applied')).toBe(1);
    await consumer.stop();
    await transport.close();
  });

  it("stamps the enqueuing service as the producer and refuses a sender or type that producer cannot claim", async () => {
    const { transport, metrics, consumer } = await setup();
    const relayed = runnable();
    await store.unitOfWork((uow) => uow.enqueue({ id: relayed.id, type: relayed.type, caseId: relayed.caseId }, encodeEnvelope(relayed)));
    await new OutboxRelay({ store, transport }).pumpOnce();
    // The relay handed in intake (the row's sender) as the producer: applied.
    expect(await countRows(db, 'SELECT count(*) AS n FROM effects')).toBe(1);
    // Published as intake while claiming the reconciler, and with no producer at all.
    const posing = runnable();
    await transport.publish({ messageId: posing.id, type: posing.type, routingKey: posing.type, body: encodeEnvelope({ ...posing, sender: { ...posing.sender, service: 'reconciler' } }), producer: 'intake' });
    const anonymous = runnable();
    await transport.publish({ messageId: anonymous.id, type: anonymous.type, routingKey: anonymous.type, body: encodeEnvelope(anonymous) });
    expect(metrics.get('refused:sender_mismatch')).toBe(1);
    expect(metrics.get('refused:producer_unauthenticated')).toBe(1);
    expect(await countRows(db, 'SELECT count(*) AS n FROM effects')).toBe(1);
    expect(transport.held(dlq).map((m) => m.messageId).sort()).toEqual([posing.id, anonymous.id].sort());
    await consumer.stop();
    await transport.close();
  });

  it('refuses the same id with a different payload hash and dead-letters it', async () => {
    const { transport, metrics, consumer } = await setup();
    const first = runnable();
    await publishEnvelope(transport, first);
    const payload = { ...first.payload, reason: 'woken' as const };
    await publishEnvelope(transport, { ...first, payload, payloadHash: payloadHash(payload) });

    const dead = transport.held(dlq);
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({ messageId: first.id, deathReason: 'rejected', deadFrom: `${topology.prefix}.turn-worker` });
    const { rows } = await db.query<{ reason: string; message_id: string }>({ text: 'SELECT reason, message_id FROM dead_letters' });
    expect(rows).toEqual([{ reason: 'hash_conflict', message_id: first.id }]);
    const inbox = await db.query<{ payload_hash: string }>({ text: 'SELECT payload_hash FROM inbox_messages' });
    expect(inbox.rows).toEqual([{ payload_hash: first.payloadHash }]);
    expect(await countRows(db, 'SELECT count(*) AS n FROM effects')).toBe(1);
    expect(metrics.get('refused:hash_conflict')).toBe(1);
    await consumer.stop();
    await transport.close();
  });

  it('dead-letters a message whose handler always fails after the delivery limit; others flow', async () => {
    const poison = runnable();
    const attempts: number[] = [];
    const { transport, metrics, consumer } = await setup((id, attempt) => {
      if (id === poison.id) {
        attempts.push(attempt);
        throw new Error('handler bug');
      }
    });
    const good = runnable();
    await Promise.all([publishEnvelope(transport, poison), publishEnvelope(transport, good)]);
    const limit = deliveryLimit(topology, 'turn-worker');
    expect(attempts).toEqual(Array.from({ length: limit + 1 }, (_, i) => i));
    expect(transport.held(dlq).map((m) => m.messageId)).toEqual([poison.id]);
    const { rows } = await db.query<{ message_id: string }>({ text: 'SELECT message_id FROM effects' });
    expect(rows).toEqual([{ message_id: good.id }]);
    expect(await countRows(db, "SELECT count(*) AS n FROM dead_letters WHERE reason = 'handler_failed'")).toBe(1);
    expect(metrics.get('consumed:failed')).toBe(limit);
    await consumer.stop();
    await transport.close();
  });

  it('is driven by the outbox relay like the broker is', async () => {
    const { transport, consumer } = await setup();
    const relay = new OutboxRelay({ store, transport, batchSize: 50, pollMs: 100 });
    await relay.start();
    const ids: string[] = [];
    await store.unitOfWork(async (uow) => {
      for (let i = 0; i < 120; i++) {
        const env = runnable();
        ids.push(env.id);
        await uow.enqueue({ id: env.id, type: env.type, caseId: env.caseId }, encodeEnvelope(env));
      }
    });
    await eventually(async () => (await countRows(db, 'SELECT count(*) AS n FROM outbox_messages WHERE published_at IS NULL')) === 0, { what: 'outbox drained' });
    const { rows } = await db.query<{ message_id: string }>({ text: 'SELECT message_id FROM effects' });
    expect(new Set(rows.map((r) => r.message_id))).toEqual(new Set(ids));
    expect(rows).toHaveLength(120);
    await relay.stop();
    await consumer.stop();
    await transport.close();
  });

  it('marks only confirmed rows published and releases the rest for the next batch', async () => {
    const { transport, consumer } = await setup();
    // Every third message is not confirmed on its first publish (as when a channel dies mid-batch).
    const attempts = new Map<string, number>();
    const flaky: Transport = {
      kind: transport.kind,
      topology: transport.topology,
      identity: transport.identity,
      needsProducer: transport.needsProducer,
      isReady: () => true,
      subscribe: (...a) => transport.subscribe(...a),
      close: () => transport.close(),
      publish: async (m) => {
        const n = (attempts.get(m.messageId) ?? 0) + 1;
        attempts.set(m.messageId, n);
        if (n === 1 && attempts.size % 3 === 0) throw new Error('not confirmed');
        await transport.publish(m);
      },
    };
    const relay = new OutboxRelay({ store, transport: flaky, batchSize: 1000 });
    await store.unitOfWork(async (uow) => {
      for (let i = 0; i < 30; i++) {
        const env = runnable();
        await uow.enqueue({ id: env.id, type: env.type, caseId: env.caseId }, encodeEnvelope(env));
      }
    });
    expect(await relay.pumpOnce()).toEqual({ claimed: 30, published: 20, failed: 10 });
    expect(await countRows(db, 'SELECT count(*) AS n FROM outbox_messages WHERE published_at IS NOT NULL')).toBe(20);
    // Released, not left claimed until the lease runs out.
    expect(await countRows(db, 'SELECT count(*) AS n FROM outbox_messages WHERE published_at IS NULL AND claimed_until IS NULL')).toBe(10);
    expect(await relay.pumpOnce()).toEqual({ claimed: 10, published: 10, failed: 0 });
    expect(await countRows(db, 'SELECT count(*) AS n FROM outbox_messages WHERE published_at IS NULL')).toBe(0);
    expect(await countRows(db, 'SELECT count(DISTINCT message_id) AS n FROM effects')).toBe(30);
    await consumer.stop();
    await transport.close();
  });
});
