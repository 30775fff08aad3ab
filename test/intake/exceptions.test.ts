/**
 * The exceptions an operator acts on (issue 14 item 1) on a REAL node over real Postgres and
 * RabbitMQ: a genuine dead letter (the broker dead-letters a delivery past the queue's
 * x-delivery-limit) is listed by GET /v1/exceptions without being lost (looking twice finds it
 * twice; the dead-letter queue still holds it), and POST /v1/dead-letters/:id/replay puts it back
 * on the queue that dead-lettered it exactly once — message id, type and user id intact, x-death
 * gone — removing it from the dead-letter queue; a second replay finds nothing. Parked tasks by
 * class and age, unknown effect outcomes and restore failures are listed; only `operator` sees
 * them, and a customer's cases never appear to a principal bound to another customer.
 */
import { randomUUID } from 'node:crypto';
import amqplib from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_AMQP_URL, eventually } from '@everdict/testkit';
import { openAcmeCase, startConsoleNode } from './consoleNode.js';
import type { ConsoleNode } from './consoleNode.js';
import { TOKENS } from './helpers.js';

let node: ConsoleNode;
let conn: amqplib.ChannelModel;
let ch: amqplib.Channel;

beforeAll(async () => {
  node = await startConsoleNode('intake_exceptions');
  conn = await amqplib.connect(TEST_AMQP_URL);
  ch = await conn.createChannel();
}, 120_000);

afterAll(async () => {
  await conn?.close().catch(() => undefined);
  await node?.stop();
});

/** The parts of GET /v1/exceptions (and the replay reply) these tests read. */
interface ExceptionsBody {
  error?: string;
  replayed?: boolean;
  deadLetter?: Record<string, unknown>;
  deadLetters: { available: boolean; queues: { queue: string; messages: number }[]; messages: { id: string; caseId: string; queue: string }[] };
  parked: { class: string; tasks: number; oldestAgeSeconds: number; oldest: { taskId: string }[] }[];
  unknownOutcomes: { callId: string; ageSeconds: number }[];
  restoreFailures: { taskId: string }[];
}

const get = async (path: string, token: string) => {
  const r = await fetch(`${node.url}${path}`, { headers: { authorization: `Bearer ${token}` } });
  return { status: r.status, body: (await r.json()) as ExceptionsBody };
};
const post = async (path: string, token: string) => {
  const r = await fetch(`${node.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
  return { status: r.status, body: (await r.json()) as ExceptionsBody };
};

/**
 * A real dead letter: opening a case publishes its `task.runnable` (outbox → relay → the
 * turn-worker queue); no turn-worker runs on this node, and a faulty consumer (this test) hands
 * every delivery back until the broker dead-letters it past the queue's x-delivery-limit.
 */
async function deadLetterOfNewCase(key: string): Promise<{ caseId: string; messageId: string }> {
  const before = await deadCount();
  const caseId = await openAcmeCase(node.url, key);
  const queue = `${node.prefix}.turn-worker`;
  const { rows } = await node.db.query<{ message_id: string }>({ text: `SELECT message_id::text FROM outbox_messages WHERE case_id = $1::uuid AND type = 'task.runnable'`, values: [caseId] });
  const messageId = rows[0]!.message_id;
  await eventually(
    async () => {
      const m = await ch.get(queue, { noAck: false });
      if (m !== false) ch.nack(m, false, true);
      // Published (confirmed, so routed) first; then gone from the queue and arrived in the dead one.
      const published = (await node.db.query({ text: 'SELECT 1 FROM outbox_messages WHERE message_id = $1::uuid AND published_at IS NOT NULL', values: [messageId] })).rowCount === 1;
      return m === false && published && (await ch.checkQueue(queue)).messageCount === 0 && (await deadCount()) === before + 1;
    },
    { what: 'the broker dead-letters the task.runnable', intervalMs: 20 },
  );
  return { caseId, messageId };
}

const deadCount = async () => (await ch.checkQueue(`${node.prefix}.turn-worker.dead`)).messageCount;
/**
 * Waits for the dead queue to hold `n` again: a peek returns its gets by closing its channel,
 * and a quorum queue takes them back through its Raft log, so for a moment after the reply
 * they are neither ready nor gone.
 */
const deadSettlesAt = (n: number) => eventually(async () => (await deadCount()) === n, { what: `${n} messages in the dead queue`, intervalMs: 20 });

describe('dead letters: inspect without loss, replay through the inbox once', () => {
  it('lists a dead letter with where it came from and why, twice, leaving it in its queue', async () => {
    const { caseId, messageId: id } = await deadLetterOfNewCase('dead-letter-inspect');
    const held = await deadCount();
    expect(held).toBeGreaterThanOrEqual(1);
    for (let look = 0; look < 2; look++) {
      const r = await get('/v1/exceptions', TOKENS.olga);
      expect(r.status).toBe(200);
      expect(r.body.deadLetters.available).toBe(true);
      const d = r.body.deadLetters.messages.find((m) => m.id === id);
      expect(d).toMatchObject({ queue: `${node.prefix}.turn-worker.dead`, originalQueue: `${node.prefix}.turn-worker`, reason: 'delivery_limit', type: 'task.runnable', caseId });
      expect(r.body.deadLetters.queues).toContainEqual({ queue: `${node.prefix}.turn-worker.dead`, messages: held });
      await deadSettlesAt(held);
    }

    // Not an operator: neither the view nor the replay.
    expect((await get('/v1/exceptions', TOKENS.acme)).status).toBe(403);
    expect((await post(`/v1/dead-letters/${id}/replay`, TOKENS.acme)).status).toBe(403);
    await deadSettlesAt(held);
  });

  it('replays it to the queue that dead-lettered it exactly once, and only then removes it', async () => {
    const dead = `${node.prefix}.turn-worker.dead`;
    const { caseId, messageId: id } = await deadLetterOfNewCase('dead-letter-replay');
    const held = await deadCount();
    const listed = (await get('/v1/exceptions', TOKENS.olga)).body.deadLetters.messages;
    expect(listed.filter((m) => m.id === id)).toHaveLength(1);
    await deadSettlesAt(held);

    const r = await post(`/v1/dead-letters/${id}/replay`, TOKENS.olga);
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ replayed: true, deadLetter: { id, caseId, originalQueue: `${node.prefix}.turn-worker` } });
    await deadSettlesAt(held - 1);
    expect((await ch.checkQueue(`${node.prefix}.turn-worker`)).messageCount).toBe(1);
    const back = await ch.get(`${node.prefix}.turn-worker`, { noAck: true });
    expect(back).not.toBe(false);
    const m = back as amqplib.GetMessage;
    expect(m.properties).toMatchObject({ messageId: id, type: 'task.runnable', userId: 'guest' });
    expect(m.properties.headers?.['x-death']).toBeUndefined();
    expect(JSON.parse(m.content.toString('utf8'))).toMatchObject({ caseId, type: 'task.runnable' });

    // Once: it is no longer a dead letter, so a second replay (a double click) finds nothing.
    const again = await post(`/v1/dead-letters/${id}/replay`, TOKENS.olga);
    expect(again.status).toBe(404);
    expect(again.body.error).toBe('dead_letter_not_found');
    expect((await ch.checkQueue(`${node.prefix}.turn-worker`)).messageCount).toBe(0);
    await deadSettlesAt(held - 1);

    // The replay is on the case's ledger: who, what, from where to where.
    const { rows } = await node.db.query<{ body: Record<string, unknown> }>({ text: `SELECT body FROM ledger WHERE case_id = $1::uuid AND kind = 'dead_letter_replayed'`, values: [caseId] });
    expect(rows.map((x) => x.body)).toEqual([expect.objectContaining({ messageId: id, replayedBy: 'olga', from: dead, to: `${node.prefix}.turn-worker` })]);
  });
});

describe('parked tasks, unknown outcomes, restore failures', () => {
  it('lists each by class and age for an operator', async () => {
    const budgetCase = await openAcmeCase(node.url, 'exceptions-parked');
    const restoreCase = await openAcmeCase(node.url, 'exceptions-restore');
    const rootOf = async (caseId: string) => (await node.db.query<{ id: string }>({ text: 'SELECT id FROM tasks WHERE case_id = $1::uuid AND parent_id IS NULL', values: [caseId] })).rows[0]!.id;
    const budgetTask = await rootOf(budgetCase);
    const restoreTask = await rootOf(restoreCase);
    // Fixture state as the turn-worker would leave it: a task parked on its budget for an hour,
    // one parked because its state could not be restored, an effect call with an unknown outcome.
    await node.db.query({ text: `UPDATE tasks SET state = 'parked', park_reason = 'budget', parked_at = now() - interval '1 hour' WHERE id = $1::uuid`, values: [budgetTask] });
    await node.db.query({
      text: `UPDATE tasks SET state = 'parked', park_reason = 'capability_gap', parked_at = now(), park_detail = '{"kind":"restore_failed","reason":"state_paper_corrupt","error":"hash mismatch"}' WHERE id = $1::uuid`,
      values: [restoreTask],
    });
    const callId = randomUUID();
    await node.db.query({ text: `INSERT INTO runtime_calls (id, task_id, turn, ordinal, kind, tool_name, status, fence_epoch, created_at) VALUES ($1::uuid, $2::uuid, 0, 0, 'effect', 'billing.refund', 'unknown', 0, now() - interval '10 minutes')`, values: [callId, budgetTask] });

    const r = await get('/v1/exceptions', TOKENS.olga);
    expect(r.status).toBe(200);
    const budget = r.body.parked.find((p) => p.class === 'budget')!;
    expect(budget.tasks).toBe(1);
    expect(budget.oldestAgeSeconds).toBeGreaterThanOrEqual(3599);
    expect(budget.oldest[0]).toMatchObject({ taskId: budgetTask, caseId: budgetCase, customer: 'acme' });
    expect(r.body.unknownOutcomes).toContainEqual(expect.objectContaining({ callId, caseId: budgetCase, taskId: budgetTask, operation: 'billing.refund', status: 'unknown' }));
    expect(r.body.unknownOutcomes.find((u) => u.callId === callId)!.ageSeconds).toBeGreaterThanOrEqual(599);
    expect(r.body.restoreFailures).toContainEqual(expect.objectContaining({ taskId: restoreTask, caseId: restoreCase, reason: 'state_paper_corrupt' }));
  });
});
