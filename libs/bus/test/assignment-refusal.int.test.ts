/**
 * A handler's refusal after its persisted-assignment check (§4, `refusedBecause`): the inbox row
 * is recorded 'refused' with the dead_letters row in the delivery's unit of work, the delivery is
 * dead-lettered and counted as `assignment_refused`, and a redelivery is a duplicate of that
 * refusal — the handler never runs again. Alone and batched. Real Postgres, in-process transport.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Store, createPgDb, migrate } from '@everdict/store';
import type { Db } from '@everdict/store';
import { freshDatabase } from '@everdict/testkit';
import { InboxConsumer, refusedBecause } from '../src/consumer.js';
import { InProcessTransport } from '../src/inprocess.js';
import { deadLetterQueue, loadTopology } from '../src/topology.js';
import { publishEnvelope } from '../src/transport.js';
import { countingMetrics, handlersFor, recordEffect, runnable } from './helpers.js';

describe('refusals by the receiver', () => {
  let db: Db;
  const topology = loadTopology();
  const dlq = deadLetterQueue(topology, 'turn-worker');

  beforeAll(async () => {
    db = createPgDb((await freshDatabase('bus assignment refusal')).url, { max: 10 });
    await migrate(db);
    await db.query({ text: 'CREATE TABLE effects (message_id uuid NOT NULL, task_id uuid NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())' });
  });
  afterAll(async () => {
    await db?.close();
  });

  for (const batchSize of [1, 32]) {
    it(`records, dead-letters and counts a refusal once, and never records it again (batchSize ${batchSize})`, async () => {
      await db.query({ text: 'TRUNCATE effects, inbox_messages, dead_letters, outbox_messages' });
      const refused = Array.from({ length: 3 }, () => runnable());
      const good = Array.from({ length: 10 }, () => runnable());
      const bad = new Set(refused.map((m) => m.id));
      const transport = new InProcessTransport(topology);
      const metrics = countingMetrics();
      const consumer = new InboxConsumer({
        store: new Store(db),
        transport,
        service: 'turn-worker',
        prefetch: 64,
        batchSize,
        retryDelayMs: 1,
        metrics,
        handlers: handlersFor(topology, 'turn-worker', async (env, uow) => {
          if (bad.has(env.id)) return refusedBecause('the sender is not the task of record');
          await recordEffect(env, uow);
          return 'applied';
        }),
      });
      await consumer.start();
      await Promise.all([...refused, ...good].map((m) => publishEnvelope(transport, m)));
      await Promise.all(refused.map((m) => publishEnvelope(transport, m))); // redelivered

      const { rows: effects } = await db.query<{ message_id: string }>({ text: 'SELECT message_id FROM effects' });
      expect(new Set(effects.map((r) => r.message_id))).toEqual(new Set(good.map((m) => m.id)));
      const { rows: dead } = await db.query<{ message_id: string; reason: string; detail: string; type: string }>({ text: 'SELECT message_id, reason, detail, type FROM dead_letters ORDER BY message_id' });
      expect(dead).toEqual(
        refused
          .map((m) => m.id)
          .sort()
          .map((id) => ({ message_id: id, reason: 'assignment_refused', detail: 'the sender is not the task of record', type: 'task.runnable' })),
      );
      const { rows: inbox } = await db.query<{ message_id: string; disposition: string }>({ text: `SELECT message_id, disposition FROM inbox_messages WHERE disposition = 'refused'` });
      expect(new Set(inbox.map((r) => r.message_id))).toEqual(bad);
      expect(transport.held(dlq).map((m) => m.messageId).sort()).toEqual([...bad].sort());
      expect(metrics.get('refused:assignment_refused')).toBe(3);
      expect(metrics.get('dead:assignment_refused')).toBe(3);
      // A redelivered refusal may run its handler again (it refuses before any statement), but
      // its inbox row settles it as a duplicate: nothing is recorded or counted twice.
      expect(metrics.get('duplicate')).toBe(3);
      await consumer.stop();
      await transport.close();
    });
  }
});
