import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { StaleFence } from '../src/errors.js';
import { seedCase, testStore } from './helpers.js';
import type { TestStore } from './helpers.js';

describe('task lease and fence', () => {
  let t: TestStore;
  beforeAll(async () => {
    t = await testStore('lease', 20);
  });
  afterAll(async () => t.close());

  it('50 concurrent claims of one task: exactly one wins, the losers get a typed answer', async () => {
    const { taskId } = await seedCase(t.store);
    const seen = (await t.store.getTask(taskId))!.row_version;
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => t.store.claimTask(taskId, `worker-${i}`, { ttlMs: 30_000, seenRowVersion: seen })),
    );
    const winners = results.filter((r) => r.claimed);
    expect(winners).toHaveLength(1);
    const losers = results.filter((r) => !r.claimed);
    expect(losers).toHaveLength(49);
    for (const l of losers) {
      expect(l.claimed).toBe(false);
      if (!l.claimed) expect(['lost_race', 'leased']).toContain(l.reason);
    }
    const row = (await t.store.getTask(taskId))!;
    expect(row.fence_epoch).toBe(1);
    expect(row.state).toBe('running');
    if (winners[0]!.claimed) expect(row.lease_owner).toBe(winners[0]!.token.owner);
    // A fresh claim attempt (re-reading the row) while the lease is live is refused as leased.
    const again = await t.store.claimTask(taskId, 'late', { ttlMs: 30_000 });
    expect(again).toMatchObject({ claimed: false, reason: 'leased' });
  });

  it('a worker whose fence is stale cannot complete, checkpoint, enqueue or renew', async () => {
    const { caseId, taskId } = await seedCase(t.store);
    const a = await t.store.claimTask(taskId, 'worker-a', { ttlMs: 150 });
    if (!a.claimed) throw new Error('first claim must win');
    await new Promise((r) => setTimeout(r, 300)); // lease expires on the database clock
    const b = await t.store.claimTask(taskId, 'worker-b', { ttlMs: 30_000 });
    if (!b.claimed) throw new Error(`second claim must win after expiry: ${JSON.stringify(b)}`);
    expect(b.token.epoch).toBe(a.token.epoch + 1);

    const before = t.staleFences.length;
    await expect(t.store.unitOfWork((uow) => uow.transitionTask(a.token, { state: 'done' }))).rejects.toBeInstanceOf(StaleFence);
    await expect(
      t.store.unitOfWork(async (uow) => {
        const paper = await uow.putPaper({ caseId, kind: 'artefact', name: `state-${newId()}`, schemaId: 'runtime-state.v1', bytes: Buffer.from('{}') });
        await uow.writeCheckpoint(a.token, { turn: 1, statePaperId: paper.paperId, stateHash: paper.contentHash });
      }),
    ).rejects.toMatchObject({ code: 'stale_fence' });
    await expect(
      t.store.unitOfWork((uow) => uow.enqueue({ id: newId(), type: 'task.finished', caseId }, Buffer.from('{}'), { fence: a.token })),
    ).rejects.toBeInstanceOf(StaleFence);
    await expect(t.store.renewLease(a.token, 30_000)).rejects.toBeInstanceOf(StaleFence);
    expect(t.staleFences.slice(before)).toEqual(['complete_task', 'write_checkpoint', 'enqueue', 'renew_lease']);

    // Nothing of the stale worker landed; the current holder's writes do.
    const { rows } = await t.store.db.query<{ n: number }>({ text: 'SELECT count(*)::int n FROM outbox_messages WHERE case_id = $1', values: [caseId] });
    expect(rows[0]!.n).toBe(0);
    expect((await t.store.getTask(taskId))!.state).toBe('running');
    await t.store.unitOfWork(async (uow) => {
      await uow.enqueue({ id: newId(), type: 'task.finished', caseId }, Buffer.from('{}'), { fence: b.token });
      await uow.transitionTask(b.token, { state: 'done' });
    });
    const done = (await t.store.getTask(taskId))!;
    expect(done.state).toBe('done');
    expect(done.lease_owner).toBeNull();
  });

  it('renewal extends the lease on the database clock and parks carry a reason', async () => {
    const { taskId } = await seedCase(t.store);
    const c = await t.store.claimTask(taskId, 'w', { ttlMs: 1_000 });
    if (!c.claimed) throw new Error('claim');
    const until = await t.store.renewLease(c.token, 60_000);
    expect(until.getTime()).toBeGreaterThan(c.leaseUntil.getTime());
    await t.store.unitOfWork((uow) => uow.transitionTask(c.token, { state: 'parked', parkReason: 'question', parkDetail: { questionId: 'q1' } }));
    const row = (await t.store.getTask(taskId))!;
    expect(row).toMatchObject({ state: 'parked', park_reason: 'question', lease_owner: null });
    expect(await t.store.claimTask(taskId, 'w2', { ttlMs: 1_000 })).toMatchObject({ claimed: false, reason: 'not_claimable' });
  });
});
