import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { JournalCommitter } from '../src/groupCommit.js';
import type { Store } from '../src/store.js';
import type { UnitOfWork } from '../src/unitOfWork.js';
import { refreshCaseStates } from '../src/caseState.js';
import { REFRESH_SET_MIN } from '../src/sql/caseState.js';
import { claimTask } from '../src/tasks.js';
import { finishWrite, seedCase, testStore } from './helpers.js';
import type { TestStore } from './helpers.js';

describe('ledger', () => {
  let t: TestStore;
  beforeAll(async () => {
    t = await testStore('ledger', 16);
  });
  afterAll(async () => t.close());

  async function chain(n: number, store: Store = t.store): Promise<string> {
    const { caseId } = await seedCase(store);
    for (let i = 0; i < n; i++) {
      await store.unitOfWork((uow) => uow.appendLedger(caseId, { kind: 'note', body: { i, text: `record ${i}` } }));
    }
    return caseId;
  }

  /** `n` cases whose root tasks one unit of work claimed: their tokens, and their ledger heads after the claim. */
  async function claimed(n: number) {
    const seeded = await Promise.all(Array.from({ length: n }, () => seedCase(t.store)));
    const tokens = await t.store.unitOfWork(async (uow) =>
      Promise.all(
        seeded.map(async (s) => {
          const c = await claimTask(uow, s.taskId, 'w', 30_000);
          if (!c.claimed) throw new Error('not claimed');
          return c.token;
        }),
      ),
    );
    const heads = await Promise.all(seeded.map(async (s) => (await t.store.readLedger(s.caseId)).at(-1)!));
    return { seeded, tokens, heads };
  }

  it('an untouched chain verifies', async () => {
    const caseId = await chain(12);
    expect(await t.store.verifyLedger(caseId)).toEqual({ ok: true, records: 12 });
  });

  it('concurrent appends retry from the head and keep one contiguous chain', async () => {
    const { caseId } = await seedCase(t.store);
    await Promise.all(
      Array.from({ length: 40 }, (_, i) => t.store.unitOfWork((uow) => uow.appendLedger(caseId, { kind: 'note', body: { i } }))),
    );
    const rows = await t.store.readLedger(caseId);
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect(new Set(rows.map((r) => (r.body as { i: number }).i)).size).toBe(40);
    expect((await t.store.verifyLedger(caseId)).ok).toBe(true);
  });

  it('a colliding append (no head row to lock) retries from the new head with the same record id', async () => {
    const caseId = newId();
    await t.store.db.query({ text: `INSERT INTO cases (id, case_type, origin_key, customer) VALUES ($1, 'legacy', $2, 'acme')`, values: [caseId, `legacy-${caseId}`] });
    const ids = Array.from({ length: 10 }, () => newId());
    const appended = await Promise.all(ids.map((recordId) => t.store.unitOfWork((uow) => uow.appendLedger(caseId, { recordId, kind: 'note', body: {} }))));
    expect(appended.map((a) => a.recordId)).toEqual(ids);
    const rows = await t.store.readLedger(caseId);
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
    expect(new Set(rows.map((r) => r.record_id))).toEqual(new Set(ids));
    expect((await t.store.verifyLedger(caseId)).ok).toBe(true);
  });

  it('re-appending the same record id returns the recorded entry instead of a second one', async () => {
    const caseId = await chain(2);
    const recordId = newId();
    const first = await t.store.unitOfWork((uow) => uow.appendLedger(caseId, { recordId, kind: 'outcome', body: { x: 1 } }));
    const again = await t.store.unitOfWork((uow) => uow.appendLedger(caseId, { recordId, kind: 'outcome', body: { x: 1 } }));
    expect(again).toEqual(first);
    expect(await t.store.readLedger(caseId)).toHaveLength(3);
  });

  it('a rolled-back unit of work leaves no ledger record', async () => {
    const caseId = await chain(1);
    await expect(
      t.store.unitOfWork(async (uow) => {
        await uow.appendLedger(caseId, { kind: 'note', body: {} });
        throw new Error('handler failed');
      }),
    ).rejects.toThrow('handler failed');
    expect(await t.store.readLedger(caseId)).toHaveLength(1);
    expect((await t.store.verifyLedger(caseId)).ok).toBe(true);
  });

  it('records of several cases append in one statement under their locks; one that collides is chained after the new head', async () => {
    const cases = [await chain(2), await chain(3), await chain(1)];
    const appended = await t.store.unitOfWork(async (uow) => {
      const heads = [];
      for (const c of [...cases].sort()) {
        const { rows } = await uow.query<{ seq: number; hash: string }>({ text: 'SELECT seq, hash FROM ledger_heads WHERE case_id = $1::uuid FOR UPDATE', values: [c] });
        heads.push({ caseId: c, head: rows[0]! });
      }
      // The second case's head as it was one record earlier (what a writer that did not lock it saw).
      return uow.appendLedgerLocked(
        heads.map((h, i) => ({ caseId: h.caseId, rec: { kind: 'note', body: { batch: i } }, lockedHead: i === 1 ? { seq: h.head.seq - 1, hash: 'stale' } : h.head })),
      );
    });
    expect(appended).toHaveLength(3);
    for (const c of cases) {
      const rows = await t.store.readLedger(c);
      expect(rows.filter((r) => r.kind === 'note' && (r.body as { batch?: number }).batch !== undefined)).toHaveLength(1);
      expect(await t.store.verifyLedger(c)).toMatchObject({ ok: true });
    }
  });

  it('records sent with the COMMIT: one that collides fails the unit of work, which commits nothing', async () => {
    // One connection: from the second attempt on, the strict statement is parsed there and goes with the COMMIT.
    const one = await testStore('ledger commit', 1);
    try {
      const [collides, fine, other] = [await chain(2, one.store), await chain(1, one.store), await chain(1, one.store)];
      const before = await Promise.all([collides, fine, other].map((c) => one.store.readLedger(c)));
      const lockHeads = async (uow: UnitOfWork, cases: string[]) => {
        const heads = [];
        for (const c of [...cases].sort()) {
          const { rows } = await uow.query<{ seq: number; hash: string }>({ text: 'SELECT seq, hash FROM ledger_heads WHERE case_id = $1::uuid FOR UPDATE', values: [c] });
          heads.push({ caseId: c, head: rows[0]! });
        }
        return heads;
      };
      for (let attempt = 0; attempt < 3; attempt++) {
        await expect(
          one.store.unitOfWork(async (uow) => {
            await uow.appendLedger(other, { kind: 'note', body: { text: 'written earlier in the same unit of work' } });
            // One head as it was a record earlier: its record would take a seq that is taken.
            const heads = await lockHeads(uow, [collides, fine]);
            return uow.appendLedgerLocked(
              heads.map((h) => ({ caseId: h.caseId, rec: { kind: 'note', body: { committed: true } }, lockedHead: h.caseId === collides ? { seq: h.head.seq - 1, hash: 'stale' } : h.head })),
              { commit: true },
            );
          }),
        ).rejects.toMatchObject({ code: 'duplicate_key' });
        expect(await Promise.all([collides, fine, other].map((c) => one.store.readLedger(c)))).toEqual(before);
      }
      const appended = await one.store.unitOfWork(async (uow) => uow.appendLedgerLocked((await lockHeads(uow, [fine])).map((h) => ({ caseId: h.caseId, rec: { kind: 'note', body: { committed: true } }, lockedHead: h.head })), { commit: true }));
      const last = (await one.store.readLedger(fine)).at(-1)!;
      expect(appended).toEqual([{ recordId: last.record_id, seq: last.seq, hash: last.hash }]);
      expect(await one.store.verifyLedger(fine)).toMatchObject({ ok: true });
    } finally {
      await one.close();
    }
  });

  it('claims in one unit of work re-derive their cases at COMMIT, one case_state record each', async () => {
    const seeded = [await seedCase(t.store), await seedCase(t.store), await seedCase(t.store)];
    await t.store.unitOfWork(async (uow) => {
      for (const s of seeded) expect(await claimTask(uow, s.taskId, 'w', 30_000)).toMatchObject({ claimed: true, caseType: 'test', untouched: true });
      // Not yet: the refresh runs after the callback, before COMMIT.
      const { rows } = await uow.query<{ n: number }>({ text: "SELECT count(*)::int AS n FROM ledger WHERE kind = 'case_state' AND case_id = ANY($1::uuid[])", values: [seeded.map((s) => s.caseId)] });
      expect(rows[0]!.n).toBe(0);
    });
    for (const s of seeded) {
      const states = (await t.store.readLedger(s.caseId)).filter((r) => r.kind === 'case_state');
      expect(states.map((r) => r.body)).toEqual([expect.objectContaining({ from: 'opened', to: 'running', cause: 'task_claimed', taskId: s.taskId })]);
      const { rows } = await t.store.db.query<{ state: string }>({ text: 'SELECT state FROM cases WHERE id = $1::uuid', values: [s.caseId] });
      expect(rows[0]!.state).toBe('running');
      expect((await t.store.verifyLedger(s.caseId)).ok).toBe(true);
    }
  });

  it('finishes group-committed together lock their cases with the write and re-derive each: one case_state record after each finish', async () => {
    const { seeded, tokens, heads } = await claimed(2);
    const committer = new JournalCommitter(t.store);
    // Written in the same tick: one statement for both finishes, in one unit of work.
    const written = await Promise.all(
      seeded.map((s, i) => committer.write(tokens[i]!, s.caseId, finishWrite, { seq: heads[i]!.seq, hash: heads[i]!.hash }, { caseCause: { cause: 'task_finished', taskId: s.taskId } })),
    );
    expect(committer.writes).toBe(2);
    for (const [i, s] of seeded.entries()) {
      const rows = await t.store.readLedger(s.caseId);
      expect(rows.map((r) => r.kind)).toEqual(['case_state', 'turn', 'case_state']);
      const last = rows.at(-1)!;
      expect(last.body).toEqual(expect.objectContaining({ from: 'running', to: 'parked', cause: 'task_finished', taskId: s.taskId }));
      expect(written[i]!.head).toEqual({ seq: last.seq, hash: last.hash });
      const { rows: c } = await t.store.db.query<{ state: string }>({ text: 'SELECT state FROM cases WHERE id = $1::uuid', values: [s.caseId] });
      expect(c[0]!.state).toBe('parked');
      expect((await t.store.verifyLedger(s.caseId)).ok).toBe(true);
    }
  });

  it('a finish whose fence went stale, batched with others, writes nothing and moves nothing of its case; the others land with their case states', async () => {
    const { seeded, tokens, heads } = await claimed(3);
    const stale = seeded[1]!;
    // Another worker took the task over; and its case row holds a state its records do not give,
    // so a derivation of that case would move it (and, without its finishWrite, record nothing).
    await t.store.db.query({ text: 'UPDATE tasks SET fence_epoch = fence_epoch + 1 WHERE id = $1::uuid', values: [stale.taskId] });
    await t.store.db.query({ text: "UPDATE cases SET state = 'opened', state_reason = NULL WHERE id = $1::uuid", values: [stale.caseId] });
    const committer = new JournalCommitter(t.store);
    const outcomes = await Promise.allSettled(
      seeded.map((s, i) => committer.write(tokens[i]!, s.caseId, finishWrite, { seq: heads[i]!.seq, hash: heads[i]!.hash }, { caseCause: { cause: 'task_finished', taskId: s.taskId } })),
    );
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toMatchObject({ code: 'stale_fence' });
    for (const s of [seeded[0]!, seeded[2]!]) {
      const rows = await t.store.readLedger(s.caseId);
      expect(rows.map((r) => r.kind)).toEqual(['case_state', 'turn', 'case_state']);
      expect((await t.store.verifyLedger(s.caseId)).ok).toBe(true);
    }
    expect((await t.store.readLedger(stale.caseId)).map((r) => r.kind)).toEqual(['case_state']);
    const { rows: c } = await t.store.db.query<{ state: string; task: string }>({
      text: 'SELECT c.state, k.state AS task FROM cases c JOIN tasks k ON k.case_id = c.id WHERE c.id = $1::uuid',
      values: [stale.caseId],
    });
    expect(c[0]).toEqual({ state: 'opened', task: 'running' });
  });

  // With `padding` idle cases more, the derivation runs as one statement for all (REFRESH_SET_MIN).
  it.each([0, REFRESH_SET_MIN])('one refresh of cases in different situations (and %i idle more) derives each on its own and records only the ones that changed', async (padding) => {
    const [idle, finished, running] = [await seedCase(t.store), await seedCase(t.store), await seedCase(t.store)];
    const more = await Promise.all(Array.from({ length: padding }, () => seedCase(t.store)));
    await t.store.unitOfWork(async (uow) => {
      for (const s of [finished, running]) expect(await claimTask(uow, s.taskId, 'w', 30_000)).toMatchObject({ claimed: true });
    });
    const before = async (caseId: string) => (await t.store.readLedger(caseId)).filter((r) => r.kind === 'case_state').length;
    const counts = await Promise.all([idle, finished, running].map((s) => before(s.caseId)));
    const unknown = newId();
    const out = await t.store.unitOfWork(async (uow) => {
      await uow.query({ text: "UPDATE tasks SET state = 'done', lease_owner = NULL, lease_until = NULL WHERE id = $1::uuid", values: [finished.taskId] });
      return refreshCaseStates(uow, [
        { caseId: running.caseId, cause: { cause: 'task_claimed', taskId: running.taskId } },
        { caseId: finished.caseId, cause: { cause: 'task_finished', taskId: finished.taskId } },
        { caseId: unknown, cause: { cause: 'task_finished' } },
        { caseId: idle.caseId, cause: { cause: 'gate_opened' } },
        ...more.map((m) => ({ caseId: m.caseId, cause: { cause: 'gate_opened' } })),
      ]);
    });
    expect([...out.keys()].sort()).toEqual([idle, finished, running, ...more].map((c) => c.caseId).sort());
    for (const m of more) expect(out.get(m.caseId)).toMatchObject({ from: 'opened', to: 'opened', appended: null });
    expect(out.get(idle.caseId)).toMatchObject({ from: 'opened', to: 'opened', reason: null, appended: null });
    expect(out.get(running.caseId)).toMatchObject({ from: 'running', to: 'running', appended: null });
    expect(out.get(finished.caseId)).toMatchObject({ from: 'running', to: 'parked', reason: 'telling_customer' });
    expect(out.get(finished.caseId)!.appended).not.toBeNull();
    expect(await Promise.all([idle, finished, running].map((s) => before(s.caseId)))).toEqual([counts[0], counts[1]! + 1, counts[2]]);
    const { rows } = await t.store.db.query<{ id: string; state: string; state_reason: string | null }>({
      text: 'SELECT id, state, state_reason FROM cases WHERE id = ANY($1::uuid[])',
      values: [[idle.caseId, finished.caseId, running.caseId]],
    });
    expect(Object.fromEntries(rows.map((r) => [r.id, [r.state, r.state_reason]]))).toEqual({
      [idle.caseId]: ['opened', null],
      [finished.caseId]: ['parked', 'telling_customer'],
      [running.caseId]: ['running', null],
    });
    for (const s of [idle, finished, running]) expect((await t.store.verifyLedger(s.caseId)).ok).toBe(true);
  });

  it('work collected for COMMIT runs once with every item, and a failing flush commits nothing', async () => {
    const caseId = await chain(1);
    const flushed: number[][] = [];
    await t.store.unitOfWork(async (uow) => {
      for (const i of [1, 2, 3]) uow.collectForCommit('test', i, async (items: number[]) => void flushed.push(items));
    });
    expect(flushed).toEqual([[1, 2, 3]]);
    await expect(
      t.store.unitOfWork(async (uow) => {
        await uow.appendLedger(caseId, { kind: 'note', body: {} });
        uow.collectForCommit('test', 0, async () => {
          throw new Error('flush failed');
        });
      }),
    ).rejects.toThrow('flush failed');
    expect(await t.store.readLedger(caseId)).toHaveLength(1);
  });

  const tamper: Array<[string, string, (caseId: string) => string]> = [
    ['an edited body', 'hash_mismatch', (c) => `UPDATE ledger SET body = '{"i": 99, "text": "forged"}' WHERE case_id = '${c}' AND seq = 5`],
    ['an edited kind', 'hash_mismatch', (c) => `UPDATE ledger SET kind = 'approval' WHERE case_id = '${c}' AND seq = 3`],
    ['an edited timestamp', 'hash_mismatch', (c) => `UPDATE ledger SET created_at = created_at - interval '1 day' WHERE case_id = '${c}' AND seq = 2`],
    ['a deleted middle row', 'gap', (c) => `DELETE FROM ledger WHERE case_id = '${c}' AND seq = 4`],
    ['a deleted last row', 'head_mismatch', (c) => `DELETE FROM ledger WHERE case_id = '${c}' AND seq = 8`],
    [
      'two reordered rows',
      'broken_link',
      (c) => `UPDATE ledger l SET kind = o.kind, body = o.body, prev_hash = o.prev_hash, hash = o.hash, created_at = o.created_at
                FROM ledger o
               WHERE l.case_id = '${c}' AND o.case_id = l.case_id AND ((l.seq = 3 AND o.seq = 6) OR (l.seq = 6 AND o.seq = 3))`,
    ],
    [
      'a rewritten row with a recomputed-looking hash',
      'hash_mismatch',
      (c) => `UPDATE ledger SET body = '{"i": 1}', hash = 'sha256:' || repeat('0', 64) WHERE case_id = '${c}' AND seq = 1`,
    ],
  ];

  it.each(tamper)('verifyLedger detects %s', async (_label, reason, statement) => {
    const caseId = await chain(8);
    expect((await t.store.verifyLedger(caseId)).ok).toBe(true);
    // The ledger refuses changes (migration 0006); an attacker who owns the database as superuser
    // switches its triggers off, and verification must still catch the edit.
    await t.store.db.transaction(async (tx) => {
      await tx.query({ text: 'SET LOCAL session_replication_role = replica' });
      await tx.query({ text: statement(caseId) });
    });
    const verdict = await t.store.verifyLedger(caseId);
    expect(verdict.ok).toBe(false);
    expect(verdict.problem?.reason).toBe(reason);
  });
});
