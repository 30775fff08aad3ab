/**
 * The control paths' receivers and the paper facade under real Postgres: a sub-agent's question
 * reaches only its parent and the parent's answer only the sub-agent that asked (§11.3); a
 * paper outside a task's narrowed context is refused and the refusal is in the ledger (§3); an
 * operator's resume and top-up wake exactly what they should (§7, §11.4). Forged senders change
 * nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEnvelope, newId, operatorActionOf, systemClock } from '@everdict/contracts';
import type { AnyEnvelope, MessageType } from '@everdict/contracts';
import type { HandlerContext } from '@everdict/bus';
import { cancelTree, createChildTask, softCancel, wakeDue } from '@everdict/store';
import type { FenceToken } from '@everdict/store';
import pino from 'pino';
import { turnWorkerHandlers } from '../src/handlers.js';
import { readPermittedPaper } from '../src/paperAccess.js';
import { paperResultStore, TurnBuffer } from '../src/turnBuffer.js';
import { claim, seedTask, storeFixture, type Fixture } from './helpers.js';

const ctx: HandlerContext = { service: 'turn-worker', deliveryCount: 0, redelivered: false, transport: 'in_process' };

describe('control paths', () => {
  let fx: Fixture;
  beforeAll(async () => {
    fx = await storeFixture('tw_control');
  });
  afterAll(async () => fx?.close());

  const handlers = turnWorkerHandlers({ owner: 'h', leaseTtlMs: () => 30_000, claims: new Map(), logger: pino({ level: 'silent' }) });
  /** The handler's outcome; a refusal (dead-lettered by the consumer) reads 'refused'. */
  const handle = async (e: AnyEnvelope) => {
    const out = await fx.store.unitOfWork((uow) => (handlers[e.type] as (e: AnyEnvelope, u: typeof uow, c: HandlerContext) => Promise<unknown>)(e, uow, ctx));
    return typeof out === 'object' && out !== null && 'refused' in out ? 'refused' : out;
  };
  /** Records the operator action intake writes with an operator control it sends (receivers look for it). */
  const recorded = async <E extends AnyEnvelope>(e: E): Promise<E> => {
    const action = operatorActionOf(e.type, e.payload as { taskId: string }, e.id);
    if (action) await fx.store.unitOfWork((uow) => uow.appendLedger(e.caseId, { kind: action.kind, body: action.match }));
    return e;
  };
  const row = async (id: string) =>
    (await fx.store.db.query<{ state: string; park_reason: string | null; cancel_requested: string | null }>({ text: 'SELECT state, park_reason, cancel_requested FROM tasks WHERE id = $1', values: [id] })).rows[0]!;
  const notes = async (id: string) => (await fx.store.db.query<{ kind: string; body: Record<string, unknown> }>({ text: 'SELECT kind, body FROM task_notes WHERE task_id = $1 ORDER BY seq', values: [id] })).rows;
  const ledger = async (caseId: string, kind: string) => (await fx.store.db.query<{ body: Record<string, unknown> }>({ text: 'SELECT body FROM ledger WHERE case_id = $1 AND kind = $2 ORDER BY seq', values: [caseId, kind] })).rows.map((r) => r.body);
  const runnables = async (caseId: string) =>
    (await fx.store.db.query<{ n: number }>({ text: "SELECT count(*)::int AS n FROM outbox_messages WHERE case_id = $1 AND type = 'task.runnable'", values: [caseId] })).rows[0]!.n;

  /** An envelope as a sender stamps it: `from` a task (turn-worker) or a service. */
  function envelope(type: MessageType, caseId: string, payload: object, from: { service?: 'turn-worker' | 'intake' | 'operator'; taskId?: string | null; parentTaskId?: string | null } = {}): AnyEnvelope {
    return buildEnvelope(
      {
        type,
        version: 1,
        caseId,
        lineage: { rootCaseId: caseId, parentTaskId: from.parentTaskId ?? null, ancestry: from.parentTaskId ? [from.parentTaskId] : [] },
        sender: { service: from.service ?? 'turn-worker', taskId: from.taskId ?? null, profile: from.taskId ? 'agent' : null, profileVersion: from.taskId ? '1' : null },
        trust: 'platform',
        payload: payload as never,
      },
      systemClock,
    ) as AnyEnvelope;
  }

  /** A root with two children; each child parked on a question it put to the root. */
  async function family() {
    const root = await seedTask(fx.store);
    const rootToken = await claim(fx.store, root.taskId, 'root');
    const kids: { id: string; token: FenceToken; questionId: string }[] = [];
    for (const permitted of [[`results/${root.taskId}/result:a`], []]) {
      const id = newId();
      await fx.store.unitOfWork((uow) =>
        createChildTask(uow, rootToken, { id, caseId: root.caseId, parentId: root.taskId, rootTaskId: root.taskId, depth: 1, ancestry: [root.taskId], spawnCallId: id, profile: 'agent', profileVersion: '1', objective: { text: 'x' }, context: { permittedPapers: permitted, grants: [] } }),
      );
      const token = await claim(fx.store, id, `kid-${kids.length}`);
      const questionId = newId();
      await fx.store.unitOfWork((uow) => uow.transitionTask(token, { state: 'parked', parkReason: 'question', parkDetail: { questionId, askedOf: root.taskId } }));
      kids.push({ id, token, questionId });
    }
    return { root, rootToken, kids };
  }
  const raised = (caseId: string, rootId: string, kid: { id: string; questionId: string }, questionId = kid.questionId) => ({
    questionId,
    taskId: kid.id,
    parentTaskId: rootId,
    reason: 'stuck',
    gap: 'which account',
    checked: 'both exist',
    dependsOn: 'the credit',
    alternatives: ['main', 'staging'],
    decisionNeeded: 'choose',
  });

  it('relays a sub-agent’s question to its parent only; a parent that parked meanwhile is woken by the sweep', async () => {
    const { root, rootToken, kids } = await family();
    const [k1] = kids as [(typeof kids)[0]];
    // Forgeries: another task claiming to be the child, a question the child is not parked on.
    expect(await handle(envelope('question.raised', root.caseId, raised(root.caseId, root.taskId, k1), { taskId: kids[1]!.id, parentTaskId: root.taskId }))).toBe('refused');
    expect(await handle(envelope('question.raised', root.caseId, raised(root.caseId, root.taskId, k1, newId()), { taskId: k1.id, parentTaskId: root.taskId }))).toBe('refused');
    expect(await notes(root.taskId)).toEqual([]);

    // The root is still running its turn: the question waits as a note, nothing wakes.
    expect(await handle(envelope('question.raised', root.caseId, raised(root.caseId, root.taskId, k1), { taskId: k1.id, parentTaskId: root.taskId }))).toBe('applied');
    expect((await notes(root.taskId)).map((n) => [n.kind, n.body['questionId'], n.body['childTaskId']])).toEqual([['question', k1.questionId, k1.id]]);
    expect(await row(root.taskId)).toMatchObject({ state: 'running' });
    expect(await ledger(root.caseId, 'question_relayed')).toEqual([{ taskId: k1.id, questionId: k1.questionId, to: root.taskId }]);
    // Nobody asked a human: no QUESTIONS row.
    expect((await fx.store.db.query({ text: 'SELECT 1 FROM questions WHERE case_id = $1', values: [root.caseId] })).rows).toHaveLength(0);

    // It then parks on its children; the sweep wakes it for the pending question.
    await fx.store.unitOfWork((uow) => uow.transitionTask(rootToken, { state: 'parked', parkReason: 'children', parkDetail: { waitingFor: 2 } }));
    const before = await runnables(root.caseId);
    const woken = await wakeDue(fx.store, { limit: 100, onWoken: async () => {} });
    expect(woken.map((t) => t.id)).toContain(root.taskId);
    expect(await row(root.taskId)).toMatchObject({ state: 'open', park_reason: null });

    // A parent parked on its children is woken by the relay itself.
    const again = await family();
    const k = again.kids[0]!;
    await fx.store.unitOfWork((uow) => uow.transitionTask(again.rootToken, { state: 'parked', parkReason: 'children', parkDetail: {} }));
    expect(await handle(envelope('question.raised', again.root.caseId, raised(again.root.caseId, again.root.taskId, k), { taskId: k.id, parentTaskId: again.root.taskId }))).toBe('applied');
    expect(await row(again.root.taskId)).toMatchObject({ state: 'open' });
    expect(await runnables(again.root.caseId)).toBe(1);
    expect(before).toBe(0);
  });

  it('an answer reaches exactly the sub-agent that asked, once, and only from the parent it asked', async () => {
    const { root, kids } = await family();
    const [k1, k2] = kids as [(typeof kids)[0], (typeof kids)[0]];
    const answer = (kid: { id: string; questionId: string }, by: string, text = 'use staging') => ({ questionId: kid.questionId, taskId: kid.id, answer: text, answeredBy: `task:${by}` });
    // A sibling cannot answer; the parent cannot answer as someone else; a human cannot answer a question put to an agent.
    expect(await handle(envelope('question.answered', root.caseId, answer(k1, k2.id), { taskId: k2.id, parentTaskId: root.taskId }))).toBe('refused');
    expect(await handle(envelope('question.answered', root.caseId, { ...answer(k1, root.taskId), answeredBy: 'alice' }, { taskId: root.taskId }))).toBe('refused');
    expect(await handle(envelope('question.answered', root.caseId, { ...answer(k1, root.taskId), answeredBy: 'alice' }, { service: 'intake' }))).toBe('refused');
    // The parent answering k1's question with k2's id wakes nobody.
    expect(await handle(envelope('question.answered', root.caseId, { ...answer(k1, root.taskId), taskId: k2.id }, { taskId: root.taskId }))).toBe('ignored');
    expect([(await row(k1.id)).state, (await row(k2.id)).state]).toEqual(['parked', 'parked']);

    expect(await handle(envelope('question.answered', root.caseId, answer(k1, root.taskId), { taskId: root.taskId }))).toBe('applied');
    expect(await row(k1.id)).toMatchObject({ state: 'open', park_reason: null });
    expect(await row(k2.id)).toMatchObject({ state: 'parked', park_reason: 'question' });
    expect(await notes(k1.id)).toEqual([{ kind: 'answer', body: { questionId: k1.questionId, answer: 'use staging', answeredBy: `task:${root.taskId}` } }]);
    expect(await notes(k2.id)).toEqual([]);
    expect(await ledger(root.caseId, 'question_answered')).toEqual([{ taskId: k1.id, questionId: k1.questionId, answeredBy: `task:${root.taskId}` }]);
    // A second answer to the same question changes nothing.
    expect(await handle(envelope('question.answered', root.caseId, answer(k1, root.taskId, 'production'), { taskId: root.taskId }))).toBe('ignored');
    expect(await notes(k1.id)).toHaveLength(1);
  });

  it('pages a permitted paper, refuses any other paper of the case and records the refusal once', async () => {
    const { root, kids } = await family();
    const [allowed, denied] = kids as [(typeof kids)[0], (typeof kids)[0]];
    await fx.store.unitOfWork(async (uow) => {
      for (const [name, text] of [
        [`results/${root.taskId}/result:a`, 'A'.repeat(30)],
        [`results/${root.taskId}/result:b`, 'secret B'],
        [`results/${denied.id}/result:own`, 'my own'],
      ] as const) {
        await uow.putPaper({ caseId: root.caseId, kind: 'artefact', name, schemaId: 'test', bytes: Buffer.from(text) });
      }
    });
    const store = (taskId: string) => ({ read: (ref: string) => paperResultStore(fx.store.db, root.caseId, new TurnBuffer()).read(taskId, ref, 0, 10) });
    expect(await store(allowed.id).read('result:a')).toEqual({ text: 'AAAAAAAAAA', offset: 0, total: 30, nextOffset: 10 });
    expect(await store(allowed.id).read(`results/${root.taskId}/result:a`)).toMatchObject({ total: 30 });
    expect(await store(denied.id).read('result:own')).toMatchObject({ text: 'my own' });
    // Not in its context: refused exactly like an unknown ref, and recorded.
    expect(await store(allowed.id).read('result:b')).toBeNull();
    expect(await store(denied.id).read('result:a')).toBeNull();
    expect(await store(allowed.id).read(`results/${denied.id}/result:own`)).toBeNull();
    expect(await readPermittedPaper(fx.store.db, root.caseId, allowed.id, 'result:b')).toEqual({ kind: 'refused', name: `results/${root.taskId}/result:b` });
    expect(await readPermittedPaper(fx.store.db, root.caseId, allowed.id, 'result:nothing')).toEqual({ kind: 'unknown' });
    const refused = await ledger(root.caseId, 'paper_read_refused');
    expect(refused.map((b) => [b['taskId'], b['paper']])).toEqual([
      [allowed.id, `results/${root.taskId}/result:b`],
      [denied.id, `results/${root.taskId}/result:a`],
      [allowed.id, `results/${denied.id}/result:own`],
    ]);
    expect(await fx.store.verifyLedger(root.caseId)).toMatchObject({ ok: true });
  });

  it('a resume wakes a task parked on its soft stop, withdraws a pending one, and never undoes a hard cancel', async () => {
    const t = await seedTask(fx.store);
    const token = await claim(fx.store, t.taskId);
    await fx.store.unitOfWork(async (uow) => {
      await softCancel(uow, t.taskId);
      await uow.transitionTask(token, { state: 'parked', parkReason: 'gate', parkDetail: { kind: 'soft_cancel' } });
    });
    const resume = (taskId: string, service: 'turn-worker' | 'intake') => envelope('task.resume', t.caseId, { taskId, requestedBy: 'olga' }, { service, taskId: service === 'turn-worker' ? taskId : null });
    expect(await handle(resume(t.taskId, 'turn-worker'))).toBe('refused'); // an agent cannot lift its own stop
    expect(await row(t.taskId)).toMatchObject({ state: 'parked', cancel_requested: 'soft' });
    expect(await handle(await recorded(resume(t.taskId, 'intake')))).toBe('applied');
    expect(await row(t.taskId)).toMatchObject({ state: 'open', park_reason: null, cancel_requested: null });
    expect(await notes(t.taskId)).toEqual([]); // the task goes on from its checkpoint unchanged
    expect(await ledger(t.caseId, 'task_resumed')).toEqual([{ taskId: t.taskId, requestedBy: 'olga', woke: true, reason: null }]);
    expect(await runnables(t.caseId)).toBe(1);

    // Requested but not yet parked: withdrawn, nothing woken.
    const running = await seedTask(fx.store);
    await claim(fx.store, running.taskId);
    await fx.store.unitOfWork((uow) => softCancel(uow, running.taskId));
    expect(await handle(await recorded(envelope('task.resume', running.caseId, { taskId: running.taskId }, { service: 'intake' })))).toBe('applied');
    expect(await row(running.taskId)).toMatchObject({ state: 'running', cancel_requested: null });

    // Hard-cancelled: final.
    const hard = await seedTask(fx.store);
    await fx.store.unitOfWork((uow) => cancelTree(uow, hard.taskId));
    expect(await handle(await recorded(envelope('task.resume', hard.caseId, { taskId: hard.taskId }, { service: 'intake' })))).toBe('ignored');
    expect(await row(hard.taskId)).toMatchObject({ state: 'cancelled', cancel_requested: 'hard' });
  });

  it('a top-up from an operator wakes a budget park once; an agent cannot top itself up', async () => {
    const t = await seedTask(fx.store);
    const token = await claim(fx.store, t.taskId);
    await fx.store.unitOfWork((uow) => uow.transitionTask(token, { state: 'parked', parkReason: 'budget', parkDetail: { dimension: 'turns' } }));
    const payload = { taskId: t.taskId, budget: { maxTurns: 3 }, toppedUpBy: 'olga', reason: 'more pages' };
    expect(await handle(envelope('budget.topped_up', t.caseId, payload, { service: 'turn-worker', taskId: t.taskId }))).toBe('refused');
    expect(await row(t.taskId)).toMatchObject({ state: 'parked', park_reason: 'budget' });
    const e = await recorded(envelope('budget.topped_up', t.caseId, payload, { service: 'intake' }));
    expect(await handle(e)).toBe('applied');
    expect(await row(t.taskId)).toMatchObject({ state: 'open', park_reason: null });
    expect(await notes(t.taskId)).toEqual([{ kind: 'top_up', body: { budget: { maxTurns: 3 }, by: 'olga', ref: `top-up:${e.id}` } }]);
    // The same message again (as the handler would see a redelivery past the inbox) adds nothing.
    expect(await handle(e)).toBe('ignored');
    expect(await notes(t.taskId)).toHaveLength(1);
    expect(await ledger(t.caseId, 'budget_topped_up')).toEqual([{ taskId: t.taskId, budget: { maxTurns: 3 }, by: 'olga', messageId: e.id, reason: 'more pages' }]);
  });
});
