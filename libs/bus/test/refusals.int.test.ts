/**
 * What the edge refuses (issue 2 acceptance): same id with a different payload hash, malformed
 * JSON, a schema-invalid envelope, an oversized body, an unknown type and an unknown version are
 * each recorded with a reason, dead-lettered into the service's dead-letter queue, never handed
 * to the handler — and the consumer goes on consuming.
 */
import type { GetMessage } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson, newId, payloadHash } from '@everdict/contracts';
import { eventually } from '@everdict/testkit';
import type { AmqpTransport } from '../src/amqp.js';
import { startInboxConsumer } from '../src/consumer.js';
import type { InboxConsumer } from '../src/consumer.js';
import { deadLetterQueue } from '../src/topology.js';
import { publishEnvelope } from '../src/transport.js';
import type { BusFixture } from './helpers.js';
import { busFixture, countRows, countingMetrics, handlersFor, recordEffect, runnable } from './helpers.js';

describe('edge refusals through RabbitMQ', () => {
  let fx: BusFixture;
  let transport: AmqpTransport;
  let consumer: InboxConsumer;
  const metrics = countingMetrics();
  const handled: string[] = [];
  const hooked: string[] = [];
  const dead: GetMessage[] = [];

  beforeAll(async () => {
    fx = await busFixture('bus refusals');
    transport = await fx.transport('refusals');
    consumer = await startInboxConsumer({
      store: fx.store,
      transport,
      service: 'turn-worker',
      prefetch: 8,
      maxBytes: 4096,
      metrics,
      onRefusal: async (r) => void hooked.push(r.reason),
      handlers: handlersFor(fx.topology, 'turn-worker', async (env, uow) => {
        await recordEffect(env, uow);
        // Counted once its first statement (which carries the inbox row) went through: a
        // duplicate runs a handler up to that statement, and no further.
        handled.push(env.id);
      }),
    });
  });
  afterAll(async () => {
    await consumer?.stop();
    await fx?.close();
  });

  /** Waits until the dead-letter queue has yielded `n` messages in total. */
  async function deadLetters(n: number): Promise<GetMessage[]> {
    const dlq = deadLetterQueue(fx.topology, 'turn-worker');
    await eventually(
      async () => {
        for (let m = await fx.admin.get(dlq, { noAck: true }); m !== false; m = await fx.admin.get(dlq, { noAck: true })) dead.push(m);
        return dead.length >= n;
      },
      { timeoutMs: 20_000, what: `${n} dead letters` },
    );
    return dead;
  }

  it('refuses the same id with a different payload hash; the first disposition stands', async () => {
    const first = runnable();
    await publishEnvelope(transport, first);
    await eventually(() => handled.includes(first.id), { what: 'first copy applied' });

    // Same id, different (valid, correctly hashed) payload: a forged or corrupted redelivery.
    const payload = { ...first.payload, reason: 'retry' as const };
    const forged = { ...first, payload, payloadHash: payloadHash(payload) };
    await publishEnvelope(transport, forged);

    const [dl] = await deadLetters(1);
    expect(dl!.properties.messageId).toBe(first.id);
    expect(JSON.parse(dl!.content.toString()).payload.reason).toBe('retry');
    expect(dl!.properties.headers?.['x-first-death-reason']).toBe('rejected');

    const { rows } = await fx.db.query<{ reason: string; message_id: string; payload_hash: string; detail: string }>({ text: 'SELECT * FROM dead_letters' });
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ reason: 'hash_conflict', message_id: first.id, payload_hash: forged.payloadHash });
    expect(rows[0]!.detail).toContain('/payloadHash');

    const inbox = await fx.db.query<{ payload_hash: string; disposition: string }>({ text: 'SELECT payload_hash, disposition FROM inbox_messages WHERE message_id = $1::uuid', values: [first.id] });
    expect(inbox.rows).toEqual([{ payload_hash: first.payloadHash, disposition: 'applied' }]);
    expect(handled.filter((id) => id === first.id)).toHaveLength(1);
    expect(await countRows(fx.db, 'SELECT count(*) AS n FROM effects')).toBe(1);
    expect(metrics.get('refused:hash_conflict')).toBe(1);
    expect(metrics.get('dead:hash_conflict')).toBe(1);
  });

  it('dead-letters malformed, invalid, oversized, unknown-type and unknown-version messages and keeps consuming', async () => {
    const raw = (body: Buffer | string, type = 'task.runnable') =>
      transport.publish({ messageId: newId(), type, routingKey: 'task.runnable', body: Buffer.isBuffer(body) ? body : Buffer.from(body) });
    const base = runnable();
    const { sender: _dropped, ...noSender } = runnable();
    const bad = [
      { reason: 'malformed_json', body: '{"id": "not closed' },
      { reason: 'invalid_envelope', body: JSON.stringify(noSender) },
      { reason: 'oversized', body: JSON.stringify({ ...runnable(), padding: 'x'.repeat(5000) }) },
      { reason: 'unknown_type', body: canonicalJson({ ...base, id: newId(), type: 'task.exploded' }) },
      { reason: 'unknown_version', body: canonicalJson({ ...base, id: newId(), version: 2 }) },
    ];
    for (const b of bad) await raw(b.body);
    const good = runnable();
    await publishEnvelope(transport, good);

    await eventually(() => handled.includes(good.id), { what: 'the valid message behind the bad ones applied' });
    const all = await deadLetters(1 + bad.length);
    expect(all).toHaveLength(1 + bad.length);

    const { rows } = await fx.db.query<{ reason: string; detail: string; message_id: string | null; type: string | null }>({
      text: "SELECT reason, detail, message_id, type FROM dead_letters WHERE reason <> 'hash_conflict' ORDER BY seq",
    });
    expect(rows.map((r) => r.reason).sort()).toEqual(bad.map((b) => b.reason).sort());
    const byReason = new Map(rows.map((r) => [r.reason, r]));
    expect(byReason.get('invalid_envelope')!.detail).toContain('sender');
    expect(byReason.get('oversized')!.detail).toContain('4096');
    expect(byReason.get('unknown_type')!.detail).toContain('/type');
    expect(byReason.get('unknown_type')!.type).toBe('task.exploded');
    expect(byReason.get('unknown_version')!.detail).toContain('/version');
    // A refused message's id is recorded when it could be read, and only then.
    expect(byReason.get('malformed_json')!.message_id).toMatch(/^[0-9a-f-]{36}$/);

    // Nothing refused reached the handler; only the two valid messages did.
    expect(handled).toHaveLength(2);
    expect(await countRows(fx.db, 'SELECT count(*) AS n FROM effects')).toBe(2);
    expect(await countRows(fx.db, 'SELECT count(*) AS n FROM inbox_messages')).toBe(2);
    for (const b of bad) expect(metrics.get(`refused:${b.reason}`)).toBe(1);
    expect(metrics.get('consumed:refused')).toBe(1 + bad.length);
    expect(hooked.sort()).toEqual(['hash_conflict', ...bad.map((b) => b.reason)].sort());
  });
});
