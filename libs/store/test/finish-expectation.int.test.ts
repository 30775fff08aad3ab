/**
 * Finishes sent with the case state they expect (JournalCommitter's expectations), on real
 * Postgres: once two finishes of a kind derived the same, the next one's write, its case's
 * derivation and its `case_state` record go in ONE round trip with the COMMIT; a derivation
 * that gives anything else rolls the whole unit of work back and the batch is derived first,
 * so a record always states what was derived. Round trips are counted at node-postgres'
 * `Client.query`, a seam, not the thing under test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../src/store.js';
import { JournalCommitter } from '../src/groupCommit.js';
import { refreshCaseStateExpecting } from '../src/sql/caseState.js';
import type { CaseStateOutcome } from '../src/sql/caseState.js';
import { claimTask } from '../src/tasks.js';
import type { Db } from '../src/db.js';
import { finishWrite, oneConnectionStore, roundTrips, seedCase } from './helpers.js';

describe('finishes sent with the case state they expect', () => {
  let db: Db;
  let store: Store;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    ({ db, store, drop } = await oneConnectionStore('finish expectation'));
  });
  afterAll(async () => {
    await db.close();
    await drop();
  });

  /** A case whose root task is claimed: its token and its ledger head after the claim. */
  async function claimedCase() {
    const s = await seedCase(store);
    const token = await store.unitOfWork(async (uow) => {
      const c = await claimTask(uow, s.taskId, 'w', 30_000);
      if (!c.claimed) throw new Error('not claimed');
      return c.token;
    });
    const head = (await store.readLedger(s.caseId)).at(-1)!;
    return { ...s, token, head: { seq: head.seq, hash: head.hash } };
  }

  /** Finishes a claimed case's root through `committer` as a root's finish; counts its round trips. */
  async function finishRoot(committer: JournalCommitter) {
    const c = await claimedCase();
    const { value, trips } = await roundTrips(() => committer.write(c.token, c.caseId, finishWrite, c.head, { caseCause: { cause: 'task_done', taskId: c.taskId }, expectKey: 'task_done:root' }));
    return { c, written: value, trips };
  }

  async function caseRow(caseId: string) {
    const { rows } = await db.query<{ state: string; state_reason: string | null }>({ text: 'SELECT state, state_reason FROM cases WHERE id = $1::uuid', values: [caseId] });
    return rows[0]!;
  }

  it('after two finishes of a kind derived the same, the next goes in one round trip, with the record the derivation gives', async () => {
    const committer = new JournalCommitter(store);
    const learning = [await finishRoot(committer), await finishRoot(committer)];
    // Derived first: the statement and derivation (with BEGIN), then the record with COMMIT.
    expect(learning[1]!.trips).toBe(2);
    expect(committer.expectations).toEqual({ met: 0, unmet: 0 });
    // The first expected finish parses its statements on the connection (one by one); from then on, one pipeline.
    await finishRoot(committer);
    const { c, written, trips } = await finishRoot(committer);
    expect(trips).toBe(1);
    expect(committer.expectations).toEqual({ met: 2, unmet: 0 });

    const rows = await store.readLedger(c.caseId);
    expect(rows.map((r) => r.kind)).toEqual(['case_state', 'turn', 'case_state']);
    const derived = (await store.readLedger(learning[0]!.c.caseId)).at(-1)!;
    // The same record the long way wrote for the same kind of finishWrite, but its own task.
    expect(rows.at(-1)!.body).toEqual({ ...(derived.body as object), taskId: c.taskId });
    expect(rows.at(-1)!.body).toMatchObject({ from: 'running', to: 'parked', reason: 'telling_customer', cause: 'task_done' });
    expect(written.head).toEqual({ seq: rows.at(-1)!.seq, hash: rows.at(-1)!.hash });
    expect(await caseRow(c.caseId)).toEqual({ state: 'parked', state_reason: 'telling_customer' });
    expect(await store.verifyLedger(c.caseId)).toMatchObject({ ok: true });
  });

  it('a finish whose case derives something else rolls back whole and is derived first: its record states what was derived', async () => {
    const committer = new JournalCommitter(store);
    await finishRoot(committer);
    await finishRoot(committer);
    // The customer closed this case meanwhile: its derivation gives `closed`, not what the kind led to.
    const c = await claimedCase();
    await db.query({ text: 'UPDATE cases SET closed_at = now() WHERE id = $1::uuid', values: [c.caseId] });
    const written = await committer.write(c.token, c.caseId, finishWrite, c.head, { caseCause: { cause: 'task_done', taskId: c.taskId }, expectKey: 'task_done:root' });
    expect(committer.expectations).toEqual({ met: 0, unmet: 1 });

    const rows = await store.readLedger(c.caseId);
    // Nothing of the expected attempt stayed: one turn record, one case_state record, as derived.
    expect(rows.map((r) => r.kind)).toEqual(['case_state', 'turn', 'case_state']);
    expect(rows.at(-1)!.body).toMatchObject({ from: 'running', to: 'closed', cause: 'task_done', taskId: c.taskId });
    expect(written.head).toEqual({ seq: rows.at(-1)!.seq, hash: rows.at(-1)!.hash });
    expect((await caseRow(c.caseId)).state).toBe('closed');
    const { rows: task } = await db.query<{ state: string }>({ text: 'SELECT state FROM tasks WHERE id = $1::uuid', values: [c.taskId] });
    expect(task[0]!.state).toBe('done');
    expect(await store.verifyLedger(c.caseId)).toMatchObject({ ok: true });

    // What it derived is learnt anew: the next finish of the kind is derived first again.
    const next = await finishRoot(committer);
    expect(next.trips).toBe(2);
    expect(committer.expectations).toEqual({ met: 0, unmet: 1 });
    expect(await store.verifyLedger(next.c.caseId)).toMatchObject({ ok: true });
  });

  it('an expected batch with a part whose fence went stale rolls back whole: the stale part is refused, the others land as derived', async () => {
    const committer = new JournalCommitter(store);
    await finishRoot(committer);
    await finishRoot(committer);
    const cases = [await claimedCase(), await claimedCase(), await claimedCase()];
    const stale = cases[1]!;
    await db.query({ text: 'UPDATE tasks SET fence_epoch = fence_epoch + 1 WHERE id = $1::uuid', values: [stale.taskId] });
    // Written in the same tick: one batch, sent as expected.
    const outcomes = await Promise.allSettled(cases.map((c) => committer.write(c.token, c.caseId, finishWrite, c.head, { caseCause: { cause: 'task_done', taskId: c.taskId }, expectKey: 'task_done:root' })));
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toMatchObject({ code: 'stale_fence' });
    expect(committer.expectations).toEqual({ met: 0, unmet: 1 });
    for (const c of [cases[0]!, cases[2]!]) {
      const rows = await store.readLedger(c.caseId);
      expect(rows.map((r) => r.kind)).toEqual(['case_state', 'turn', 'case_state']);
      expect(rows.at(-1)!.body).toMatchObject({ from: 'running', to: 'parked', reason: 'telling_customer', taskId: c.taskId });
      expect(await store.verifyLedger(c.caseId)).toMatchObject({ ok: true });
    }
    expect((await store.readLedger(stale.caseId)).map((r) => r.kind)).toEqual(['case_state']);
    expect(await caseRow(stale.caseId)).toEqual({ state: 'running', state_reason: null });
  });

  it('an expecting derivation fails, typed, when the case derives otherwise or its head is not at the expected record, and writes nothing', async () => {
    const c = await claimedCase();
    const expected: CaseStateOutcome = { from_state: 'running', to_state: 'running', from_reason: null, to_reason: null, why: [], changed: false };
    const stateOf = async () => (await caseRow(c.caseId)).state;
    // Right outcome, right head: it passes.
    await expect(store.unitOfWork((uow) => uow.query(refreshCaseStateExpecting(c.caseId, expected, c.head)))).resolves.toMatchObject({ rows: [expect.objectContaining({ expected: true })] });
    // Right outcome, the head elsewhere (a part that was not written).
    await expect(store.unitOfWork((uow) => uow.query(refreshCaseStateExpecting(c.caseId, expected, { seq: c.head.seq + 1, hash: c.head.hash })))).rejects.toMatchObject({ code: 'case_state_unexpected' });
    // The head right, another outcome: the case runs, the expectation says it moved.
    await db.query({ text: "UPDATE tasks SET state = 'done' WHERE id = $1::uuid", values: [c.taskId] });
    for (const wrong of [expected, { ...expected, to_state: 'parked', to_reason: 'unreconciled', changed: true }, { ...expected, to_state: 'parked', to_reason: 'telling_customer', changed: true, why: ['x'] }]) {
      await expect(store.unitOfWork((uow) => uow.query(refreshCaseStateExpecting(c.caseId, wrong, c.head)))).rejects.toMatchObject({ code: 'case_state_unexpected' });
    }
    // Each failed statement's unit of work rolled back: the case row was never moved.
    expect(await stateOf()).toBe('running');
  });
});
