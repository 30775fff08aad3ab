/**
 * The first turn's model intent written with the claim (firstIntent.ts), under real Postgres:
 * exactly the request the activation builds for turn 0, in the claim's transaction and fence —
 * and only for a task that has nothing journalled, checkpointed or waiting.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { payloadHash } from '@everdict/contracts';
import { addNote, claimTask, loadTurnCalls } from '@everdict/store';
import { Catalog, prewriteFirstIntent } from '@everdict/turn-worker';
import { seedTask, storeFixture, type Fixture } from './helpers.js';

describe('the first intent written with the claim', () => {
  let fx: Fixture;
  let catalog: Catalog;
  beforeAll(async () => {
    fx = await storeFixture('tw_first_intent');
    const dir = mkdtempSync(join(tmpdir(), 'everdict-first-intent-'));
    writeFileSync(join(dir, 'agent.json'), JSON.stringify({ steps: [{ text: 'done' }] }));
    catalog = new Catalog(
      {
        baseDir: dir,
        config: {
          version: 1,
          routes: { r: { adapter: 'scripted', model: 'scripted', scriptPath: 'agent.json' } },
          profiles: { agent: { version: '1', route: 'r', prompt: 'You handle tickets.' } },
          caseTypes: { ticket: { rootProfile: 'agent', scope: { reads: 'all', writes: [], forbidden: [] } } },
        },
      },
      { db: fx.store.db, timing: () => undefined },
    );
  });
  afterAll(async () => fx?.close());

  /** Claims the task and lets prewriteFirstIntent run in the claim's unit of work. */
  const claimAndPrewrite = (taskId: string) =>
    fx.store.unitOfWork(async (uow) => {
      const c = await claimTask(uow, taskId, 'w1', 30_000);
      if (!c.claimed) throw new Error('not claimed');
      const fresh = await prewriteFirstIntent(catalog, uow, { token: c.token, task: c.task, caseType: c.caseType, untouched: c.untouched, headAtCommit: c.headAtCommit });
      return { wrote: fresh !== null, fresh, epoch: c.token.epoch };
    });

  it("writes turn 0's exact request and intent under the claim's fence, once", async () => {
    const { taskId } = await seedTask(fx.store);
    await fx.store.db.query({ text: `UPDATE tasks SET objective = '{"text":"reset the password of user 7"}'::jsonb WHERE id = $1::uuid`, values: [taskId] });
    const first = await claimAndPrewrite(taskId);
    expect(first.wrote).toBe(true);
    const [call, ...rest] = await loadTurnCalls(fx.store.db, taskId, 0);
    expect(rest).toHaveLength(0);
    expect(call).toMatchObject({ ordinal: 0, kind: 'model', status: 'intent', route: 'r', fenceEpoch: first.epoch });
    // The paper holds the canonical request document; its hash is what the kernel compares.
    const doc = JSON.parse(call!.request!.toString('utf8')) as { route: { name: string }; request: { system: string; messages: { role: string; content: string }[] } };
    expect(call!.requestHash).toBe(payloadHash(doc));
    expect(doc.route.name).toBe('r');
    expect(doc.request.system).toBe('You handle tickets.');
    expect(doc.request.messages).toEqual([{ role: 'user', content: 'reset the password of user 7' }]);
    // What the activation starts from instead of reading it back: the intent as written, and the
    // case's ledger head as the claim's unit of work committed it (its case_state record).
    expect(first.fresh!.intent).toMatchObject({ callId: call!.id, turn: 0, ordinal: 0, status: 'intent', requestHash: call!.requestHash });
    const head = (await fx.store.db.query<{ seq: number; hash: string }>({ text: 'SELECT h.seq, h.hash FROM ledger_heads h JOIN tasks t ON t.case_id = h.case_id WHERE t.id = $1::uuid', values: [taskId] })).rows[0]!;
    expect(first.fresh!.headAtCommit?.head).toEqual({ seq: head.seq, hash: head.hash });
    expect(head.seq).toBeGreaterThan(0);

    // A later claim of the same task (given back, it has a journal now) writes nothing.
    await fx.store.db.query({ text: `UPDATE tasks SET state = 'open', lease_owner = NULL, lease_until = NULL WHERE id = $1::uuid`, values: [taskId] });
    expect((await claimAndPrewrite(taskId)).wrote).toBe(false);
    expect(await loadTurnCalls(fx.store.db, taskId, 0)).toHaveLength(1);
  });

  it('writes nothing for a task with a pending note or a profile the config does not know', async () => {
    const noted = await seedTask(fx.store);
    await fx.store.unitOfWork((uow) => addNote(uow, noted.taskId, 'info', { text: 'read this first' }, null));
    expect((await claimAndPrewrite(noted.taskId)).wrote).toBe(false);
    const unknown = await seedTask(fx.store, 'nobody');
    expect((await claimAndPrewrite(unknown.taskId)).wrote).toBe(false);
    for (const t of [noted, unknown]) expect(await loadTurnCalls(fx.store.db, t.taskId, 0)).toHaveLength(0);
  });
});
