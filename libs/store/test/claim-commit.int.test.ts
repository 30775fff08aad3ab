/**
 * A batch's claims on real Postgres: the case states they change are re-derived after
 * everything else the unit of work wrote (its other COMMIT-time work included), under the case
 * locks, and their `case_state` records go with the COMMIT. Round trips are counted at
 * node-postgres' `Client.query`, a seam, not the thing under test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../src/store.js';
import { claimTask, claimTasksAhead } from '../src/tasks.js';
import type { Db } from '../src/db.js';
import { oneConnectionStore, roundTrips, seedCase } from './helpers.js';

describe("a batch's claims at COMMIT", () => {
  let db: Db;
  let store: Store;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    // One connection: the measured unit of work runs where the warm-up parsed its statements.
    ({ db, store, drop } = await oneConnectionStore('claim commit'));
  });
  afterAll(async () => {
    await db.close();
    await drop();
  });


  /** Claims the tasks of a batch as the turn-worker does; `later` is COMMIT-time work queued after the claims. */
  const claimBatch = (taskIds: readonly string[], later: string[]) =>
    store.unitOfWork(async (uow) => {
      await claimTasksAhead(uow, taskIds, 'w', 30_000);
      const claims: Awaited<ReturnType<typeof claimTask>>[] = [];
      for (const id of taskIds) claims.push(await claimTask(uow, id, 'w', 30_000));
      // What the case rows say when work queued after the claims runs: not derived yet.
      uow.collectForCommit('later', null, async () => {
        const { rows } = await uow.query<{ state: string }>({ text: 'SELECT c.state FROM cases c JOIN tasks t ON t.case_id = c.id WHERE t.id = ANY($1::uuid[])', values: [taskIds] });
        later.push(...rows.map((r) => r.state));
      });
      return claims;
    });

  it('derives the states last, with the locks in one round trip, and commits the records with the COMMIT', async () => {
    // Warm-up on this connection: the statements are parsed, so later ones can travel together.
    await claimBatch([(await seedCase(store)).taskId, (await seedCase(store)).taskId], []);

    const seeded = [await seedCase(store), await seedCase(store)];
    const later: string[] = [];
    const { value: claims, trips } = await roundTrips(() => claimBatch(seeded.map((s) => s.taskId), later));
    // BEGIN with the claim statement, the later work's read; the case locks with the derivations; the records with COMMIT.
    expect(trips).toBe(4);
    expect(later).toEqual(['opened', 'opened']);

    for (const [i, s] of seeded.entries()) {
      const claim = claims[i]!;
      expect(claim).toMatchObject({ claimed: true, token: { taskId: s.taskId, epoch: 1 } });
      const ledger = await store.readLedger(s.caseId);
      expect(ledger.map((r) => r.kind)).toEqual(['case_state']);
      expect(ledger[0]!.body).toMatchObject({ from: 'opened', to: 'running', cause: 'task_claimed', taskId: s.taskId });
      // The head the activation starts from is the record the COMMIT carried.
      expect(claim.claimed && claim.headAtCommit?.head).toEqual({ seq: ledger[0]!.seq, hash: ledger[0]!.hash });
      expect((await store.verifyLedger(s.caseId)).ok).toBe(true);
    }
    const { rows } = await db.query<{ state: string }>({ text: 'SELECT state FROM cases WHERE id = ANY($1::uuid[])', values: [seeded.map((s) => s.caseId)] });
    expect(rows.map((r) => r.state)).toEqual(['running', 'running']);
  });

  it('a case the claims leave where it is gets no record, and the unit of work commits as usual', async () => {
    const s = await seedCase(store);
    await claimBatch([s.taskId], []);
    await db.query({ text: "UPDATE tasks SET lease_until = now() - interval '1 second' WHERE id = $1::uuid", values: [s.taskId] });
    // Claimed again once its lease ran out: the case is running already.
    const [claim] = await claimBatch([s.taskId], []);
    expect(claim).toMatchObject({ claimed: true, token: { epoch: 2 } });
    const ledger = await store.readLedger(s.caseId);
    expect(ledger.map((r) => r.kind)).toEqual(['case_state']);
    expect(claim!.claimed && claim!.headAtCommit?.head).toEqual({ seq: ledger[0]!.seq, hash: ledger[0]!.hash });
    expect((await store.verifyLedger(s.caseId)).ok).toBe(true);
  });
});
