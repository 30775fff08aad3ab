/**
 * A handler that always throws (issue 2 acceptance): the message is redelivered until the
 * queue's delivery limit, then lands in the dead-letter queue with a recorded reason — and the
 * messages behind it keep flowing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@everdict/testkit';
import { startInboxConsumer } from '../src/consumer.js';
import type { InboxConsumer } from '../src/consumer.js';
import { deadLetterQueue, deliveryLimit } from '../src/topology.js';
import { publishEnvelope } from '../src/transport.js';
import type { BusFixture } from './helpers.js';
import { busFixture, countRows, countingMetrics, handlersFor, recordEffect, runnable } from './helpers.js';

describe('poison message through RabbitMQ', () => {
  let fx: BusFixture;
  let consumer: InboxConsumer | undefined;

  beforeAll(async () => {
    fx = await busFixture('bus poison');
  });
  afterAll(async () => {
    await consumer?.stop();
    await fx?.close();
  });

  it('dead-letters after the delivery limit and keeps the queue flowing', async () => {
    const transport = await fx.transport('poison');
    const metrics = countingMetrics();
    const poison = runnable();
    const attempts: number[] = [];
    const limit = deliveryLimit(fx.topology, 'turn-worker');
    expect(limit).toBeGreaterThan(0);

    consumer = await startInboxConsumer({
      store: fx.store,
      transport,
      service: 'turn-worker',
      prefetch: 4,
      retryDelayMs: 5,
      metrics,
      handlers: handlersFor(fx.topology, 'turn-worker', async (env, uow, ctx) => {
        await recordEffect(env, uow); // rolled back with the unit of work when we throw
        if (env.id === poison.id) {
          attempts.push(ctx.deliveryCount);
          throw new Error('handler bug');
        }
      }),
    });

    await publishEnvelope(transport, poison);
    const behind = [runnable(), runnable(), runnable()];
    for (const m of behind) await publishEnvelope(transport, m);

    const dlq = deadLetterQueue(fx.topology, 'turn-worker');
    const dl = await eventually(() => fx.admin.get(dlq, { noAck: true }), { timeoutMs: 30_000, what: 'poison message dead-lettered' });
    expect(dl.properties.messageId).toBe(poison.id);

    // One first delivery plus `limit` redeliveries, each seen with its delivery count.
    expect(attempts).toEqual(Array.from({ length: limit + 1 }, (_, i) => i));
    await eventually(async () => (await countRows(fx.db, 'SELECT count(*) AS n FROM effects')) === behind.length, { what: 'messages behind the poison applied' });
    const { rows } = await fx.db.query<{ message_id: string }>({ text: 'SELECT message_id FROM effects' });
    expect(rows.map((r) => r.message_id).sort()).toEqual(behind.map((m) => m.id).sort());

    const dead = await fx.db.query<{ reason: string; message_id: string; detail: string }>({ text: 'SELECT reason, message_id, detail FROM dead_letters' });
    expect(dead.rows).toHaveLength(1);
    expect(dead.rows[0]).toMatchObject({ reason: 'handler_failed', message_id: poison.id });
    expect(dead.rows[0]!.detail).toContain('handler bug');
    // The poison left nothing behind: no inbox row (rolled back), no effect.
    expect(await countRows(fx.db, `SELECT count(*) AS n FROM inbox_messages WHERE message_id = '${poison.id}'`)).toBe(0);
    expect(metrics.get('consumed:failed')).toBe(limit);
    expect(metrics.get('consumed:dead_lettered')).toBe(1);
    expect(metrics.get('dead:handler_failed')).toBe(1);
  });
});
