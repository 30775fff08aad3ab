/**
 * The agent graph's statements and the message handlers under real Postgres: the lease sweep,
 * batched renewal, health-gated wake-ups, and receivers that authenticate against persisted
 * assignments and order plan revisions.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEnvelope, newId, systemClock } from '@everdict/contracts';
import type { AnyEnvelope } from '@everdict/contracts';
import type { HandlerContext } from '@everdict/bus';
import { createChildTask, recordPlanRevision, renewLeases, reportRouteHealth, StaleFence, sweepLeases, wakeDue, writeTurnAlone } from '@everdict/store';
import type { FenceToken, TaskRow } from '@everdict/store';
import pino from 'pino';
import { sendRunnable } from '../src/envelopes.js';
import { PlanOutOfOrder, turnWorkerHandlers } from '../src/handlers.js';
import { claim, seedTask, storeFixture, type Fixture } from './helpers.js';

const ctx: HandlerContext = { service: 'turn-worker', deliveryCount: 0, redelivered: false, transport: 'in_process' };

describe('the agent graph', () => {
  let fx: Fixture;
  beforeAll(async () => {
    fx = await storeFixture('tw_graph');
  });
  afterAll(async () => fx?.close());

  const row = async (id: string) => (await fx.store.db.query<{ state: string; park_reason: string | null; lease_owner: string | null }>({ text: 'SELECT state, park_reason, lease_owner FROM tasks WHERE id = $1', values: [id] })).rows[0]!;

  it('sweeps expired leases into runnable tasks; the dead holder is fenced out', async () => {
    const t = await seedTask(fx.store);
    const token = await claim(fx.store, t.taskId, 'dead', 100);
    const live = await seedTask(fx.store);
    const liveToken = await claim(fx.store, live.taskId, 'alive', 30_000);
    await new Promise((r) => setTimeout(r, 250));
    const swept = await sweepLeases(fx.store, { limit: 100, onExpired: async (uow, task) => void (await sendRunnable(uow, task, 'retry', null)) });
    expect(swept.map((s) => s.id)).toEqual([t.taskId]);
    expect(await row(t.taskId)).toMatchObject({ state: 'open', lease_owner: null });
    expect((await fx.store.db.query({ text: "SELECT 1 FROM outbox_messages WHERE case_id = $1 AND type = 'task.runnable'", values: [t.caseId] })).rows).toHaveLength(1);
    await expect(writeTurnAlone(fx.store, token, t.caseId, { papers: [], completions: [], intents: [], checkpoint: null, ledger: null }, null)).rejects.toBeInstanceOf(StaleFence);
    // Batched renewal: the live lease is renewed, the swept one is reported stale.
    const held = await renewLeases(fx.store, 'alive', [{ taskId: live.taskId, epoch: liveToken.epoch }], 30_000);
    expect([...held.keys()]).toEqual([live.taskId]);
    expect((await renewLeases(fx.store, 'dead', [{ taskId: t.taskId, epoch: token.epoch }], 30_000)).size).toBe(0);
  });

  it('wakes provider_down parks when the backoff elapsed or the route is healthy again', async () => {
    const park = async (route: string, wakeAfterMs: number) => {
      const t = await seedTask(fx.store);
      const token = await claim(fx.store, t.taskId);
      await writeTurnAlone(fx.store, token, t.caseId, { papers: [], completions: [], intents: [], checkpoint: null, ledger: null, transition: { state: 'parked', parkReason: 'provider_down', parkDetail: { route, attempt: 1 }, wakeAfterMs } }, null);
      return t.taskId;
    };
    const elapsed = await park('r1', 1);
    const healed = await park('r2', 60_000);
    const waiting = await park('r3', 60_000);
    await new Promise((r) => setTimeout(r, 50));
    await reportRouteHealth(fx.store.db, 'r2', true);
    const woken = await wakeDue(fx.store, { limit: 100, onWoken: async () => {} });
    expect(woken.map((w) => w.id).sort()).toEqual([elapsed, healed].sort());
    expect(await row(waiting)).toMatchObject({ state: 'parked', park_reason: 'provider_down' });
  });

  it('wakes connector_down parks when the connector is healthy again (a new MCP connection reports it)', async () => {
    const park = async (connector: string) => {
      const t = await seedTask(fx.store);
      const token = await claim(fx.store, t.taskId);
      await writeTurnAlone(fx.store, token, t.caseId, { papers: [], completions: [], intents: [], checkpoint: null, ledger: null, transition: { state: 'parked', parkReason: 'connector_down', parkDetail: { connector, attempt: 1 }, wakeAfterMs: 60_000 } }, null);
      return t.taskId;
    };
    const healed = await park('mcp:tickets');
    const waiting = await park('mcp:files');
    await new Promise((r) => setTimeout(r, 50));
    await reportRouteHealth(fx.store.db, 'mcp:tickets', true);
    const woken = await wakeDue(fx.store, { limit: 100, onWoken: async () => {} });
    expect(woken.map((w) => w.id)).toEqual([healed]);
    expect(await row(waiting)).toMatchObject({ state: 'parked', park_reason: 'connector_down' });
  });

  describe('receivers check persisted assignments and plan order', () => {
    let parent: { caseId: string; taskId: string };
    let child: TaskRow;
    let childToken: FenceToken;
    const handlers = turnWorkerHandlers({ owner: 'h', leaseTtlMs: () => 30_000, claims: new Map(), logger: pino({ level: 'silent' }) });
    const fromChild = (type: 'plan.submitted' | 'task.finished', payload: object, sender?: string): AnyEnvelope =>
      buildEnvelope(
        {
          type,
          version: 1,
          caseId: parent.caseId,
          lineage: { rootCaseId: parent.caseId, parentTaskId: parent.taskId, ancestry: [parent.taskId] },
          sender: { service: 'turn-worker', taskId: sender ?? child.id, profile: 'agent', profileVersion: '1' },
          trust: 'platform',
          payload: payload as never,
        },
        systemClock,
      ) as AnyEnvelope;
    // A refusal (dead-lettered and counted by the consumer) reads 'refused'.
    const handle = async (e: AnyEnvelope) => {
      const out = await fx.store.unitOfWork((uow) => (handlers[e.type] as (e: AnyEnvelope, u: typeof uow, c: HandlerContext) => Promise<unknown>)(e, uow, ctx));
      return typeof out === 'object' && out !== null && 'refused' in out ? 'refused' : out;
    };
    const steps = [{ stepId: 'a', title: 'A', dependsOn: [] }];

    beforeAll(async () => {
      parent = await seedTask(fx.store);
      const parentToken = await claim(fx.store, parent.taskId, 'p');
      const childId = newId();
      await fx.store.unitOfWork(async (uow) => {
        await createChildTask(uow, parentToken, { id: childId, caseId: parent.caseId, parentId: parent.taskId, rootTaskId: parent.taskId, depth: 1, ancestry: [parent.taskId], spawnCallId: childId, profile: 'agent', profileVersion: '1', objective: { text: 'x' }, context: null });
        await uow.transitionTask(parentToken, { state: 'parked', parkReason: 'children', parkDetail: {} });
      });
      childToken = await claim(fx.store, childId, 'c');
      for (const revision of [1, 2]) await fx.store.unitOfWork((uow) => recordPlanRevision(uow, childToken, { revision, planHash: `sha256:${String(revision).repeat(64)}`, steps, rowVersion: 7 }));
      child = (await fx.store.db.query<TaskRow>({ text: 'SELECT id FROM tasks WHERE id = $1', values: [childId] })).rows[0]!;
    });

    const plan = (revision: number, extra: object = {}) => ({ taskId: child.id, parentTaskId: parent.taskId, revision, expectedRevision: revision - 1, rowVersion: 7, planHash: `sha256:${String(revision).repeat(64)}`, steps, ...extra });
    const confirmations = async () => (await fx.store.db.query<{ revision: number; confirmed_by: string }>({ text: 'SELECT revision, confirmed_by FROM plan_confirmations WHERE task_id = $1 ORDER BY revision', values: [child.id] })).rows;

    it('refuses an out-of-order plan revision, confirms in order, ignores repeats and forgeries', async () => {
      await expect(handle(fromChild('plan.submitted', plan(2)))).rejects.toBeInstanceOf(PlanOutOfOrder);
      expect(await handle(fromChild('plan.submitted', plan(1, { rowVersion: 8 })))).toBe('refused'); // does not match the persisted revision
      expect(await handle(fromChild('plan.submitted', plan(1), parent.taskId))).toBe('refused'); // a claimed sender is not the child
      expect(await confirmations()).toEqual([]);
      expect(await handle(fromChild('plan.submitted', plan(1)))).toBe('applied');
      expect(await handle(fromChild('plan.submitted', plan(1)))).toBe('ignored');
      expect(await handle(fromChild('plan.submitted', plan(2)))).toBe('applied');
      expect(await confirmations()).toEqual([
        { revision: 1, confirmed_by: parent.taskId },
        { revision: 2, confirmed_by: parent.taskId },
      ]);
    });

    it('wakes the parent only on a report the persisted child state backs', async () => {
      const report = { taskId: child.id, parentTaskId: parent.taskId, outcome: 'done', summary: 'fine' };
      expect(await handle(fromChild('task.finished', report))).toBe('refused'); // the child is still running
      expect(await row(parent.taskId)).toMatchObject({ state: 'parked', park_reason: 'children' });
      await fx.store.unitOfWork((uow) => uow.transitionTask(childToken, { state: 'done' }));
      expect(await handle(fromChild('task.finished', report, parent.taskId))).toBe('refused'); // forged sender
      expect(await handle(fromChild('task.finished', report))).toBe('applied');
      expect(await row(parent.taskId)).toMatchObject({ state: 'open', park_reason: null });
      const runnable = await fx.store.db.query({ text: "SELECT 1 FROM outbox_messages WHERE case_id = $1 AND type = 'task.runnable'", values: [parent.caseId] });
      expect(runnable.rows).toHaveLength(1);
    });

    it('waits for every child report, not for the children states: both ended, one report in, the parent sleeps on', async () => {
      const p = await seedTask(fx.store);
      const pToken = await claim(fx.store, p.taskId, 'p');
      const ids = [newId(), newId()];
      await fx.store.unitOfWork(async (uow) => {
        for (const id of ids) {
          await createChildTask(uow, pToken, { id, caseId: p.caseId, parentId: p.taskId, rootTaskId: p.taskId, depth: 1, ancestry: [p.taskId], spawnCallId: id, profile: 'agent', profileVersion: '1', objective: { text: 'x' }, context: null });
        }
        await uow.transitionTask(pToken, { state: 'parked', parkReason: 'children', parkDetail: {} });
      });
      // Both children end before either report is handled (their messages are still on their way).
      for (const id of ids) {
        const token = await claim(fx.store, id, 'c');
        await fx.store.unitOfWork((uow) => uow.transitionTask(token, { state: 'done' }));
      }
      const report = (id: string): AnyEnvelope =>
        buildEnvelope(
          {
            type: 'task.finished',
            version: 1,
            caseId: p.caseId,
            lineage: { rootCaseId: p.caseId, parentTaskId: p.taskId, ancestry: [p.taskId] },
            sender: { service: 'turn-worker', taskId: id, profile: 'agent', profileVersion: '1' },
            trust: 'platform',
            payload: { taskId: id, parentTaskId: p.taskId, outcome: 'done', summary: `report of ${id}` },
          },
          systemClock,
        ) as AnyEnvelope;
      expect(await handle(report(ids[0]!))).toBe('applied');
      expect(await row(p.taskId)).toMatchObject({ state: 'parked', park_reason: 'children' });
      expect(await handle(report(ids[1]!))).toBe('applied');
      expect(await row(p.taskId)).toMatchObject({ state: 'open', park_reason: null });
      const notes = await fx.store.db.query<{ kind: string }>({ text: 'SELECT kind FROM task_notes WHERE task_id = $1', values: [p.taskId] });
      expect(notes.rows.map((n) => n.kind)).toEqual(['child_report', 'child_report']);
    });
  });
});
