import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { eventually } from '@everdict/testkit';
import { StaleFence } from '../src/errors.js';
import { newPaper, writeTurnAlone } from '../src/journal.js';
import { cancelTree } from '../src/taskGraph.js';
import { transitionTask } from '../src/sql/tasks.js';
import { claimTask, claimTasksAhead, loadTask, renewLeases, wakeDue, wakeTask } from '../src/tasks.js';
import type { TurnWrite } from '../src/journal.js';
import { seedCase, testStore } from './helpers.js';
import type { TestStore } from './helpers.js';

describe('task lease and fence', () => {
  let t: TestStore;
  beforeAll(async () => {
    t = await testStore('lease', 20);
  });
  afterAll(async () => t.close());

  const task = async (id: string) => (await loadTask(t.store.db, id))!;

  it('50 concurrent claims of one task: exactly one wins, the losers get a typed answer', async () => {
    const { taskId } = await seedCase(t.store);
    // Each claimer runs the production claim in a unit of work of its own, as a handler does.
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => t.store.unitOfWork((uow) => claimTask(uow, taskId, `worker-${i}`, 30_000))),
    );
    const winners = results.filter((r) => r.claimed);
    expect(winners).toHaveLength(1);
    const losers = results.filter((r) => !r.claimed);
    expect(losers).toHaveLength(49);
    for (const l of losers) {
      expect(l.claimed).toBe(false);
      if (!l.claimed) expect(l.reason).toBe('leased');
    }
    const row = await task(taskId);
    expect(row.fence_epoch).toBe(1);
    expect(row.state).toBe('running');
    if (winners[0]!.claimed) {
      expect(row.lease_owner).toBe(winners[0]!.token.owner);
      expect(winners[0]!.task).toMatchObject({ id: taskId, state: 'running', fence_epoch: 1, lease_owner: winners[0]!.token.owner });
    }
    // A later claim while the lease is live is refused as leased.
    expect(await claimTask(t.store.db, taskId, 'late', 30_000)).toMatchObject({ claimed: false, reason: 'leased' });
  });

  it('claims made ahead for a batch: one statement, each taken once by its claimTask, the rest claimed as usual', async () => {
    const [a, b, held, cancelling] = await Promise.all([seedCase(t.store), seedCase(t.store), seedCase(t.store), seedCase(t.store)]);
    expect(await claimTask(t.store.db, held.taskId, 'other-worker', 30_000)).toMatchObject({ claimed: true });
    await t.store.db.query({ text: "UPDATE tasks SET cancel_requested = 'hard' WHERE id = $1::uuid", values: [cancelling.taskId] });
    const ids = [a.taskId, b.taskId, held.taskId, cancelling.taskId, a.taskId];
    const results = await t.store.unitOfWork(async (uow) => {
      expect(await claimTasksAhead(uow, ids, 'w', 30_000)).toBe(2);
      // Made ahead: no statement of its own, so the epoch moved once however often it is asked.
      return [await claimTask(uow, a.taskId, 'w', 30_000), await claimTask(uow, b.taskId, 'w', 30_000), await claimTask(uow, a.taskId, 'w', 30_000), await claimTask(uow, held.taskId, 'w', 30_000), await claimTask(uow, cancelling.taskId, 'w', 30_000)];
    });
    expect(results[0]).toMatchObject({ claimed: true, token: { taskId: a.taskId, owner: 'w', epoch: 1 }, untouched: true, caseType: expect.any(String) });
    expect(results[1]).toMatchObject({ claimed: true, token: { taskId: b.taskId, owner: 'w', epoch: 1 } });
    expect(results.slice(2)).toEqual([
      { claimed: false, reason: 'leased', state: 'running' },
      { claimed: false, reason: 'leased', state: 'running' },
      { claimed: false, reason: 'cancelling', state: 'open' },
    ]);
    expect(await task(a.taskId)).toMatchObject({ state: 'running', fence_epoch: 1, lease_owner: 'w' });
    expect(await task(held.taskId)).toMatchObject({ fence_epoch: 1, lease_owner: 'other-worker' });
  });

  it('a claim made ahead that no handler takes fails its unit of work: no lease is left without an activation', async () => {
    const { taskId } = await seedCase(t.store);
    await expect(t.store.unitOfWork((uow) => claimTasksAhead(uow, [taskId], 'w', 30_000))).rejects.toThrow(/never taken by a handler/);
    expect(await task(taskId)).toMatchObject({ state: 'open', fence_epoch: 0, lease_owner: null });
  });

  it('a hard-cancelled task is never claimed, whatever its state says', async () => {
    const { taskId } = await seedCase(t.store);
    // The request lands before the tree is cancelled: still open, already hard-cancelling.
    await t.store.db.query({ text: "UPDATE tasks SET cancel_requested = 'hard' WHERE id = $1::uuid", values: [taskId] });
    expect(await claimTask(t.store.db, taskId, 'w', 30_000)).toEqual({ claimed: false, reason: 'cancelling', state: 'open' });
    await t.store.unitOfWork((uow) => cancelTree(uow, taskId));
    expect(await claimTask(t.store.db, taskId, 'w', 30_000)).toEqual({ claimed: false, reason: 'not_claimable', state: 'cancelled' });
    expect(await task(taskId)).toMatchObject({ state: 'cancelled', lease_owner: null });
    expect(await claimTask(t.store.db, newId(), 'w', 30_000)).toEqual({ claimed: false, reason: 'not_found' });
  });

  it('a worker whose fence is stale cannot complete, checkpoint, enqueue or renew', async () => {
    const { caseId, taskId } = await seedCase(t.store);
    const a = await claimTask(t.store.db, taskId, 'worker-a', 150);
    if (!a.claimed) throw new Error('first claim must win');
    await new Promise((r) => setTimeout(r, 300)); // lease expires on the database clock
    const b = await claimTask(t.store.db, taskId, 'worker-b', 30_000);
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
    expect(await renewLeases(t.store, a.token.owner, [{ taskId, epoch: a.token.epoch }], 30_000)).toEqual(new Map());
    expect(t.staleFences.slice(before)).toEqual(['complete_task', 'write_checkpoint', 'enqueue', 'renew_lease']);

    // Nothing of the stale worker landed; the current holder's writes do.
    const { rows } = await t.store.db.query<{ n: number }>({ text: 'SELECT count(*)::int n FROM outbox_messages WHERE case_id = $1', values: [caseId] });
    expect(rows[0]!.n).toBe(0);
    expect((await task(taskId)).state).toBe('running');
    await t.store.unitOfWork(async (uow) => {
      await uow.enqueue({ id: newId(), type: 'task.finished', caseId }, Buffer.from('{}'), { fence: b.token });
      await uow.transitionTask(b.token, { state: 'done' });
    });
    const done = await task(taskId);
    expect(done.state).toBe('done');
    expect(done.lease_owner).toBeNull();
  });

  it('the same owner re-claiming after its lease expired holds a new epoch; its writes at the old epoch are refused', async () => {
    // The fence is the epoch, not the owner: a worker that re-claims its own task (after a pause
    // outlived its lease) must not be able to finish work it began under the previous claim.
    const { caseId, taskId } = await seedCase(t.store);
    const claim = (ttlMs: number) => t.store.unitOfWork((uow) => claimTask(uow, taskId, 'worker-a', ttlMs));
    const first = await claim(100);
    if (!first.claimed) throw new Error(`first claim must win: ${JSON.stringify(first)}`);
    const old = first.token;
    const second = await eventually(async () => {
      const c = await claim(60_000);
      return c.claimed ? c : undefined;
    }, { what: 're-claim once the lease expired on the database clock' });
    expect(second.token.owner).toBe(old.owner);
    expect(second.token.epoch).toBe(old.epoch + 1);

    const turnWrite = (turn: number): TurnWrite => {
      const state = newPaper({ kind: 'artefact', name: `state-${newId()}`, schemaId: 'runtime-state.v1', bytes: Buffer.from(`{"turn":${turn}}`) });
      return { papers: [state], completions: [], intents: [], checkpoint: { turn, statePaperId: state.id, stateHash: state.contentHash, contextHash: null, versions: {} }, ledger: null };
    };
    const before = t.staleFences.length;
    await expect(t.store.unitOfWork((uow) => uow.transitionTask(old, { state: 'done' }))).rejects.toBeInstanceOf(StaleFence);
    await expect(
      t.store.unitOfWork(async (uow) => {
        const paper = await uow.putPaper({ caseId, kind: 'artefact', name: `state-${newId()}`, schemaId: 'runtime-state.v1', bytes: Buffer.from('{}') });
        await uow.writeCheckpoint(old, { turn: 1, statePaperId: paper.paperId, stateHash: paper.contentHash });
      }),
    ).rejects.toBeInstanceOf(StaleFence);
    await expect(
      t.store.unitOfWork((uow) => uow.enqueue({ id: newId(), type: 'task.finished', caseId }, Buffer.from('{}'), { fence: old })),
    ).rejects.toBeInstanceOf(StaleFence);
    await expect(writeTurnAlone(t.store, old, caseId, turnWrite(1), null)).rejects.toBeInstanceOf(StaleFence);
    expect([...(await renewLeases(t.store, old.owner, [{ taskId, epoch: old.epoch }], 30_000)).keys()]).toEqual([]);
    expect(t.staleFences.slice(before)).toEqual(['complete_task', 'write_checkpoint', 'enqueue', 'write_journal', 'renew_lease']);

    // Nothing written at the old epoch landed; the task is still leased at the new one.
    const landed = await t.store.db.query<{ outbox: number; checkpoints: number }>({
      text: `SELECT (SELECT count(*)::int FROM outbox_messages WHERE case_id = $1::uuid) outbox,
                    (SELECT count(*)::int FROM turn_checkpoints WHERE task_id = $2::uuid) checkpoints`,
      values: [caseId, taskId],
    });
    expect(landed.rows[0]).toEqual({ outbox: 0, checkpoints: 0 });
    expect(await task(taskId)).toMatchObject({ state: 'running', lease_owner: 'worker-a', fence_epoch: second.token.epoch });

    // The same writes at the current epoch do land.
    await writeTurnAlone(t.store, second.token, caseId, turnWrite(1), null);
    await t.store.unitOfWork((uow) => uow.transitionTask(second.token, { state: 'done' }));
    const { rows } = await t.store.db.query<{ fence_epoch: number }>({ text: 'SELECT fence_epoch FROM turn_checkpoints WHERE task_id = $1::uuid', values: [taskId] });
    expect(rows).toEqual([{ fence_epoch: second.token.epoch }]);
    expect((await task(taskId)).state).toBe('done');
  });

  it('renewal extends the lease on the database clock; a park carries a reason and only its wake cause ends it', async () => {
    const { taskId } = await seedCase(t.store);
    const c = await claimTask(t.store.db, taskId, 'w', 1_000);
    if (!c.claimed) throw new Error('claim');
    const renewed = await renewLeases(t.store, 'w', [{ taskId, epoch: c.token.epoch }], 60_000);
    expect(renewed.get(taskId)!.getTime()).toBeGreaterThan(c.task.lease_until!.getTime());
    await t.store.unitOfWork((uow) => uow.transitionTask(c.token, { state: 'parked', parkReason: 'question', parkDetail: { questionId: 'q1' } }));
    expect(await task(taskId)).toMatchObject({ state: 'parked', park_reason: 'question', park_detail: { questionId: 'q1' }, lease_owner: null });
    expect(await claimTask(t.store.db, taskId, 'w2', 1_000)).toMatchObject({ claimed: false, reason: 'not_claimable', state: 'parked' });

    // A top-up does not end a question park; an answer does, and the task is claimable again.
    expect(await t.store.unitOfWork((uow) => wakeTask(uow, taskId, 'top_up'))).toBeUndefined();
    expect((await task(taskId)).state).toBe('parked');
    const woken = await t.store.unitOfWork((uow) => wakeTask(uow, taskId, 'answer'));
    expect(woken).toMatchObject({ id: taskId, state: 'open', park_reason: null, park_detail: null });
    expect(await claimTask(t.store.db, taskId, 'w2', 1_000)).toMatchObject({ claimed: true, token: { epoch: c.token.epoch + 1 } });
  });

  it('a renewal locks its rows in task-id order: a writer holding the lower one and taking the higher next never deadlocks with it', async () => {
    // Every statement that locks many task rows (a claim of several, a group-commit write's
    // fence) takes them in task-id order. A renewal that took them in the order it was given
    // would hold the higher row while waiting for the lower: a deadlock, which Postgres breaks
    // only after deadlock_timeout (1 s) by failing one of the two — a stall of every turn
    // waiting on either.
    const seeded = await Promise.all([seedCase(t.store), seedCase(t.store)]);
    const [loId, hiId] = seeded.map((c) => c.taskId).sort();
    // The higher task is claimed first and with the earlier lease end: a walk of the running
    // leases by their end, or of the table's rows, or of the renewal's list, meets it first.
    const claim = async (taskId: string, ttlMs: number) => {
      const c = await claimTask(t.store.db, taskId, 'renewer', ttlMs);
      if (!c.claimed) throw new Error('claim');
      return c.token;
    };
    const hi = await claim(hiId!, 30_000);
    const lo = await claim(loId!, 40_000);
    const lock = (id: string) => ({ text: 'SELECT 1 FROM tasks WHERE id = $1::uuid FOR NO KEY UPDATE', values: [id] });
    let renewal: Promise<Map<string, Date>> | undefined;
    await t.store.db.transaction(async (tx) => {
      await tx.query({ text: "SET LOCAL lock_timeout = '5s'" });
      await tx.query(lock(lo.taskId));
      // The renewal names the higher task first, and waits for the lower one the writer holds.
      renewal = renewLeases(t.store, 'renewer', [hi, lo].map((k) => ({ taskId: k.taskId, epoch: k.epoch })), 60_000);
      renewal.catch(() => {}); // awaited below, after the writer's transaction
      await eventually(
        async () => {
          const { rows } = await t.store.db.query<{ n: number }>({
            text: "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%UPDATE tasks t SET lease_until%'",
          });
          return rows[0]!.n === 1;
        },
        { what: 'the renewal waiting for the lower row' },
      );
      // The writer goes on to the higher row, as a statement locking both in task-id order does.
      await tx.query(lock(hi.taskId));
    });
    expect([...(await renewal!).keys()].sort()).toEqual([lo.taskId, hi.taskId]);
  });

  it('a renewal does not wait for a row another worker holds now', async () => {
    const claim = async (owner: string) => {
      const { taskId } = await seedCase(t.store);
      const c = await claimTask(t.store.db, taskId, owner, 30_000);
      if (!c.claimed) throw new Error('claim');
      return c.token;
    };
    const mine = await claim('renewer');
    const theirs = await claim('other');
    // The other worker is writing its task; a renewal that still names it (as a stale holder's
    // does) renews its own row and answers without waiting for that one.
    const renewed = await t.store.db.transaction(async (tx) => {
      await tx.query({ text: 'SELECT 1 FROM tasks WHERE id = $1::uuid FOR NO KEY UPDATE', values: [theirs.taskId] });
      return renewLeases(t.store, 'renewer', [mine, theirs].map((k) => ({ taskId: k.taskId, epoch: k.epoch })), 60_000);
    });
    expect([...renewed.keys()]).toEqual([mine.taskId]);
  }, 10_000);

  it('a timer park arms its backoff in the transition; the swept wake keeps its detail; other parks arm none', async () => {
    const { taskId } = await seedCase(t.store);
    const c = await claimTask(t.store.db, taskId, 'w', 30_000);
    if (!c.claimed) throw new Error('claim');
    expect(() => transitionTask(taskId, 'w', c.token.epoch, { state: 'parked', parkReason: 'budget', parkDetail: {}, wakeAfterMs: 10 })).toThrow(/arms no timer/);
    expect(() => transitionTask(taskId, 'w', c.token.epoch, { state: 'parked' })).toThrow(/park reason/);
    await t.store.unitOfWork((uow) => uow.transitionTask(c.token, { state: 'parked', parkReason: 'connector_down', parkDetail: { connector: 'billing', attempt: 2 }, wakeAfterMs: 1 }));
    const armed = await t.store.db.query<{ armed: boolean }>({ text: 'SELECT wake_at IS NOT NULL AND wake_at > parked_at AS armed FROM tasks WHERE id = $1::uuid', values: [taskId] });
    expect(armed.rows[0]).toEqual({ armed: true });
    await new Promise((r) => setTimeout(r, 20));
    const causes: string[] = [];
    const woken = await wakeDue(t.store, { limit: 100, onWoken: async (_uow, w, cause) => void causes.push(`${w.id}:${cause}`) });
    expect(woken.map((w) => w.id)).toContain(taskId);
    expect(causes).toContain(`${taskId}:backoff`);
    expect(await task(taskId)).toMatchObject({ state: 'open', park_reason: null, park_detail: { connector: 'billing', attempt: 2 } });
  });
});
