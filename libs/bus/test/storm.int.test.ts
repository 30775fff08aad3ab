/**
 * Redelivery storm (issue 2 acceptance): 1,000 distinct messages, each published 1–5 times in
 * shuffled order through the real broker. The handler's effect rows must be exactly the 1,000
 * distinct messages, and every extra copy is counted as a duplicate — with and without batching.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '@everdict/testkit';
import { startInboxConsumer } from '../src/consumer.js';
import type { InboxConsumer } from '../src/consumer.js';
import { publishEnvelope } from '../src/transport.js';
import type { BusFixture } from './helpers.js';
import { busFixture, countRows, countingMetrics, handlersFor, recordEffect, runnable, shuffle } from './helpers.js';

// The same storm for the consumer as every service runs it (one delivery per unit of work) and as
// the turn-worker runs it (ready deliveries batched into one unit of work).
describe.each([
  { mode: 'one delivery per unit of work', label: 'storm', prefetch: 64, batchSize: undefined, seed: undefined },
  { mode: 'batched deliveries', label: 'batch-storm', prefetch: 128, batchSize: 64, seed: 11 },
])('redelivery storm through RabbitMQ ($mode)', ({ label, prefetch, batchSize, seed }) => {
  let fx: BusFixture;
  let consumer: InboxConsumer | undefined;

  beforeAll(async () => {
    fx = await busFixture(`bus ${label}`);
  });
  afterAll(async () => {
    await consumer?.stop();
    await fx.close();
  });

  it('applies each of 1,000 distinct messages exactly once whatever the copies and order', async () => {
    const metrics = countingMetrics();
    const transport = await fx.transport(label);
    const messages = Array.from({ length: 1000 }, () => runnable());
    const copies = messages.map((_, i) => 1 + ((i * 7) % 5)); // 1..5 copies each
    const publishes = shuffle(
      messages.flatMap((m, i) => Array.from({ length: copies[i]! }, () => m)),
      seed,
    );
    const total = publishes.length;
    expect(total).toBeGreaterThan(2500);

    consumer = await startInboxConsumer({
      store: fx.store,
      transport,
      service: 'turn-worker',
      prefetch,
      ...(batchSize === undefined ? {} : { batchSize }),
      metrics,
      handlers: handlersFor(fx.topology, 'turn-worker', async (env, uow) => {
        await recordEffect(env, uow);
      }),
    });
    await Promise.all(publishes.map((m) => publishEnvelope(transport, m)));

    await eventually(() => metrics.get('consumed:applied') + metrics.get('consumed:duplicate') >= total, { timeoutMs: 40_000, what: 'all deliveries consumed' });

    const { rows } = await fx.db.query<{ message_id: string }>({ text: 'SELECT message_id FROM effects' });
    expect(rows).toHaveLength(1000);
    expect(new Set(rows.map((r) => r.message_id))).toEqual(new Set(messages.map((m) => m.id)));
    expect(await countRows(fx.db, "SELECT count(*) AS n FROM inbox_messages WHERE consumer = 'turn-worker'")).toBe(1000);
    expect(metrics.get('consumed:applied')).toBe(1000);
    expect(metrics.get('duplicate')).toBe(total - 1000);
    expect(metrics.get('consumed:failed')).toBe(0);
    expect(await countRows(fx.db, 'SELECT count(*) AS n FROM dead_letters')).toBe(0);
  });
});
