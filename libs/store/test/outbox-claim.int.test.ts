/**
 * The relay's claim by key (claimOutboxByIds) against real Postgres: it takes exactly the named
 * rows that are still claimable — never a row of another id, one leased to a live claim, one
 * published, or (with `producers`) one another service enqueued — and it finds them through the
 * message-id key in the generic plan a relay's connection keeps, not through
 * `outbox_unpublished_idx`, whose dead entries a busy table piles up.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { claimOutboxByIds } from '../src/sql/outbox.js';
import { genericPlan, seedCase, testStore } from './helpers.js';
import type { TestStore } from './helpers.js';

describe('claiming outbox rows by message id', () => {
  let fx: TestStore;
  let caseId: string;
  beforeAll(async () => {
    fx = await testStore('outbox_claim');
    ({ caseId } = await seedCase(fx.store));
  });
  afterAll(async () => fx?.close());

  /** Commits one outbox row per service named, each with an envelope-shaped body naming its sender. */
  async function enqueue(...services: string[]): Promise<string[]> {
    const ids = services.map(() => newId());
    await fx.store.unitOfWork(async (uow) => {
      for (const [i, service] of services.entries()) {
        await uow.enqueue({ id: ids[i]!, type: 'task.runnable', caseId }, Buffer.from(JSON.stringify({ id: ids[i], sender: { service } })));
      }
    });
    return ids;
  }

  it('takes only the named rows still claimable', async () => {
    const [a, b, unnamed] = await enqueue('intake', 'gate', 'intake');
    const claimed = (await fx.store.claimOutboxByIds('relay-1', [b!, a!, newId()], 30_000)).sort((x, y) => x.seq - y.seq);
    expect(claimed.map((r) => r.message_id)).toEqual([a, b]);

    // Leased to relay-1: nobody else takes them, by key or not; the unnamed row is still there.
    expect(await fx.store.claimOutboxByIds('relay-2', [a!, b!], 30_000)).toEqual([]);
    expect((await fx.store.claimOutbox('relay-2', 10, 30_000)).map((r) => r.message_id)).toEqual([unnamed]);

    // Published stays published; released is claimable again at once.
    await fx.store.markPublished([claimed[0]!.seq]);
    await fx.store.releaseOutbox([claimed[1]!.seq]);
    expect((await fx.store.claimOutboxByIds('relay-3', [a!, b!], 30_000)).map((r) => r.message_id)).toEqual([b]);
  });

  it('takes a row whose lease ran out', async () => {
    const [a] = await enqueue('intake');
    expect(await fx.store.claimOutboxByIds('relay-1', [a!], 1)).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 20));
    const again = await fx.store.claimOutboxByIds('relay-2', [a!], 30_000);
    expect(again.map((r) => r.message_id)).toEqual([a]);
    const { rows } = await fx.store.db.query<{ claimed_by: string; attempts: number }>({ text: 'SELECT claimed_by, attempts FROM outbox_messages WHERE message_id = $1::uuid', values: [a] });
    expect(rows[0]).toEqual({ claimed_by: 'relay-2', attempts: 2 });
  });

  it('with producers, only the rows those services enqueued', async () => {
    const [fromIntake, fromGate] = await enqueue('intake', 'gate');
    expect((await fx.store.claimOutboxByIds('relay-gate', [fromIntake!, fromGate!], 30_000, ['gate'])).map((r) => r.message_id)).toEqual([fromGate]);
    expect((await fx.store.claimOutboxByIds('relay-intake', [fromIntake!, fromGate!], 30_000, ['intake', 'coordinator'])).map((r) => r.message_id)).toEqual([fromIntake]);
  });
});

/**
 * A relay's connection keeps the generic plan it built while the table was small (never analysed:
 * this machine runs without autovacuum), then claims through it for its whole life: the plan must
 * probe the message-id key both then and once the table is large.
 */
describe('the claim by message id, planned on a small table and on a large one', () => {
  let fx: TestStore;
  let caseId: string;
  beforeAll(async () => {
    fx = await testStore('outbox_claim_plan');
    ({ caseId } = await seedCase(fx.store));
  });
  afterAll(async () => fx?.close());

  const insert = (rows: number, published: boolean) =>
    fx.store.db.query({
      text: `INSERT INTO outbox_messages (message_id, type, routing_key, case_id, body, published_at)
             SELECT gen_random_uuid(), 'task.runnable', 'task.runnable', $1::uuid, '\\x7b7d'::bytea, CASE WHEN $3::bool THEN now() END
               FROM generate_series(1, $2::int)`,
      values: [caseId, rows, published],
    });

  it('probes the message-id key, never scanning the table or walking outbox_unpublished_idx', async () => {
    const stages: [string, () => Promise<unknown>][] = [
      ['a new table', async () => {}],
      ['a few pages, never analysed', () => insert(60, false)],
      ['5,000 published rows, analysed', async () => {
        await insert(5_000, true);
        await fx.store.db.query({ text: 'ANALYZE outbox_messages' });
      }],
    ];
    for (const [stage, setUp] of stages) {
      await setUp();
      for (const producers of [undefined, ['gate']]) {
        const sql = claimOutboxByIds('relay-plan', [newId(), newId()], 30_000, producers);
        const plan = await genericPlan(fx.store.db, sql, ['text', 'double precision', 'uuid[]', ...(producers ? ['text[]'] : [])]);
        expect(plan, `${stage}:\n${plan}`).toMatch(/Index Scan using outbox_messages_message_id_key on outbox_messages/);
        expect(plan, `${stage}:\n${plan}`).not.toMatch(/outbox_unpublished_idx|Seq Scan on outbox_messages/);
      }
    }
  });

  it('is planned once per connection, not at every call: the connection settles on the generic plan', async () => {
    // Postgres plans a named statement's first five executions for their values, then keeps the
    // generic plan unless those custom plans looked cheaper. Calls of 1 to 8 ids, as a relay makes.
    const counts = await fx.store.db.transaction(async (tx) => {
      for (let n = 1; n <= 8; n++) await tx.query(claimOutboxByIds('relay-plans', Array.from({ length: n }, () => newId()), 30_000));
      const { rows } = await tx.query<{ generic_plans: string; custom_plans: string }>({
        text: "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'ev_claim_outbox_ids'",
      });
      return rows[0];
    });
    expect(counts, 'the claim was prepared on this connection').toBeDefined();
    expect(Number(counts!.custom_plans)).toBeLessThanOrEqual(5);
    expect(Number(counts!.generic_plans)).toBeGreaterThanOrEqual(3);
  });
});
