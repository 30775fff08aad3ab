/**
 * The journal statements under real Postgres: group commit fences every task on its own, the
 * ledger append is a compare-and-set with a fallback under the head lock, and journal papers
 * are verified when read back.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { JournalCommitter, loadTurnCalls, newPaper, PaperCorrupt, StaleFence, supersedeIntent, writeTurnAlone } from '@everdict/store';
import type { FenceToken, TurnWrite } from '@everdict/store';
import { claim, seedTask, storeFixture, type Fixture } from './helpers.js';

const turnWrite = (turn: number, withLedger = true): TurnWrite => {
  const request = newPaper({ kind: 'artefact', name: `calls/${newId()}/request`, schemaId: 'test', bytes: Buffer.from(`{"turn":${turn}}`) });
  const state = newPaper({ kind: 'artefact', name: `state/${newId()}`, schemaId: 'test', bytes: Buffer.from(`{"state":${turn}}`) });
  return {
    papers: [request, state],
    completions: [],
    intents: [{ id: newId(), turn, ordinal: 0, kind: 'model', toolName: null, requestPaperId: request.id, requestHash: request.contentHash, route: 'main', versions: { runtime: 'test' } }],
    checkpoint: { turn: turn + 1, statePaperId: state.id, stateHash: state.contentHash, contextHash: null, versions: {} },
    ledger: withLedger ? { kind: 'turn', body: { turn } } : null,
  };
};

describe('journal writes', () => {
  let fx: Fixture;
  beforeAll(async () => {
    fx = await storeFixture('tw_journal');
  });
  afterAll(async () => fx?.close());

  const count = async (sql: string, values: unknown[]) => (await fx.store.db.query<{ n: number }>({ text: sql, values })).rows[0]!.n;

  it('one statement carries many tasks; a stale part writes nothing and fails alone', async () => {
    const tasks = await Promise.all([seedTask(fx.store), seedTask(fx.store), seedTask(fx.store)]);
    const tokens = await Promise.all(tasks.map((t) => claim(fx.store, t.taskId)));
    const stale: FenceToken = { ...tokens[2]!, epoch: tokens[2]!.epoch - 1 };
    const committer = new JournalCommitter(fx.store);
    const heads = { seq: 0, hash: 'genesis' };
    const results = await Promise.allSettled([
      committer.write(tokens[0]!, tasks[0]!.caseId, turnWrite(0), heads),
      committer.write(tokens[1]!, tasks[1]!.caseId, turnWrite(0), heads),
      committer.write(stale, tasks[2]!.caseId, turnWrite(0), heads),
    ]);
    expect(committer.statements).toBe(1);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    expect((results[2] as PromiseRejectedResult).reason).toBeInstanceOf(StaleFence);
    expect(fx.staleFences).toContain('write_journal');
    for (const [i, t] of tasks.entries()) {
      const expected = i < 2 ? 1 : 0;
      expect(await count('SELECT count(*)::int AS n FROM runtime_calls WHERE task_id = $1', [t.taskId])).toBe(expected);
      expect(await count('SELECT count(*)::int AS n FROM turn_checkpoints WHERE task_id = $1', [t.taskId])).toBe(expected);
      expect(await count('SELECT count(*)::int AS n FROM ledger WHERE case_id = $1', [t.caseId])).toBe(expected);
      expect(await fx.store.verifyLedger(t.caseId)).toMatchObject({ ok: true });
    }
  });

  it('a ledger append against a moved head is redone under the head lock; the chain stays whole', async () => {
    const t = await seedTask(fx.store);
    const token = await claim(fx.store, t.taskId);
    const first = await writeTurnAlone(fx.store, token, t.caseId, turnWrite(0), { seq: 0, hash: 'genesis' });
    expect(first.head).toMatchObject({ seq: 1 });
    await fx.store.unitOfWork((uow) => uow.appendLedger(t.caseId, { kind: 'other', body: {} })); // moves the head behind our back
    const second = await writeTurnAlone(fx.store, token, t.caseId, turnWrite(1), first.head);
    expect(second.head).toMatchObject({ seq: 3 });
    expect(await fx.store.verifyLedger(t.caseId)).toMatchObject({ ok: true, records: 3 });
    const third = await writeTurnAlone(fx.store, token, t.caseId, turnWrite(2), second.head);
    expect(third.head).toMatchObject({ seq: 4 });
  });

  it('an unanswered model intent can be superseded by a different request (its paper keeps its own name)', async () => {
    const t = await seedTask(fx.store);
    const token = await claim(fx.store, t.taskId);
    const w = turnWrite(0, false);
    await writeTurnAlone(fx.store, token, t.caseId, w, null);
    const callId = w.intents[0]!.id;
    // The turn-worker names a request paper after its call: the superseding one has the same name.
    const next = newPaper({ kind: 'artefact', name: w.papers[0]!.name, schemaId: 'test', bytes: Buffer.from('{"turn":0,"notes":1}') });
    expect(await fx.store.unitOfWork((uow) => supersedeIntent(uow, token, t.caseId, callId, next, 'main', { runtime: 'test' }))).toBe(true);
    const [call] = await loadTurnCalls(fx.store.db, t.taskId, 0);
    expect(call).toMatchObject({ id: callId, status: 'intent', requestHash: next.contentHash });
    expect(call!.request!.toString()).toBe('{"turn":0,"notes":1}');
  });

  it('reading the journal back verifies paper bytes', async () => {
    const t = await seedTask(fx.store);
    const token = await claim(fx.store, t.taskId);
    const w = turnWrite(0, false);
    await writeTurnAlone(fx.store, token, t.caseId, w, null);
    expect((await loadTurnCalls(fx.store.db, t.taskId, 0))[0]!.request!.toString()).toBe('{"turn":0}');
    await fx.store.db.query({ text: `UPDATE paper_revisions SET bytes = convert_to('{"turn":9}', 'UTF8') WHERE paper_id = $1`, values: [w.papers[0]!.id] });
    await expect(loadTurnCalls(fx.store.db, t.taskId, 0)).rejects.toBeInstanceOf(PaperCorrupt);
  });
});
