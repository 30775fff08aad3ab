/**
 * The reconciler's timer sweeps against a real Postgres: expired task leases, parked-task
 * timers, stale outbox claims, and the gauges — one tick of the real loop each.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Registry } from 'prom-client';
import { buildEnvelope, encodeEnvelope, newId, systemClock } from '@everdict/contracts';
import { Store, claimTask, createPgDb, loadTask, migrate } from '@everdict/store';
import type { Db } from '@everdict/store';
import { ConnectorSet } from '@everdict/connectors';
import { freshDatabase } from '@everdict/testkit';
import { ReconcilerLoop, reconcilerMetrics } from '../src/index.js';

let db: Db;
let store: Store;
let loop: ReconcilerLoop;
const registry = new Registry();
const silent = { info: () => {}, warn: () => {}, error: () => {} };

beforeAll(async () => {
  db = createPgDb((await freshDatabase('reconciler_sweeps')).url, { max: 3 });
  await migrate(db);
  store = new Store(db);
  loop = new ReconcilerLoop({ store, connectors: new ConnectorSet([]), metrics: reconcilerMetrics(registry), logger: silent, clock: systemClock, outboxGraceMs: 1_000 });
});
afterAll(async () => {
  await db?.close();
});

async function openTask(): Promise<{ caseId: string; taskId: string }> {
  return store.unitOfWork(async (uow) => {
    const { caseId } = await uow.openCase({ caseType: 't', originKey: `sweep:${newId()}`, customer: 'acme' });
    return { caseId, taskId: await uow.createTask({ caseId, profile: 'p' }) };
  });
}

const runnable = async (taskId: string) => {
  const { rows } = await db.query<{ body: Buffer }>({ text: `SELECT body FROM outbox_messages WHERE type = 'task.runnable' ORDER BY seq` });
  return rows.map((r) => JSON.parse(r.body.toString('utf8')) as { sender: { service: string }; payload: { taskId: string; reason: string } }).filter((m) => m.payload.taskId === taskId);
};

describe('reconciler sweeps', () => {
  it('releases an expired lease (database clock) and nudges the task; counts it', async () => {
    const { taskId } = await openTask();
    const claim = await claimTask(store.db, taskId, 'dead-worker', 200);
    expect(claim.claimed).toBe(true);
    await loop.tick();
    expect((await loadTask(store.db, taskId))?.state).toBe('running'); // not yet expired
    await new Promise((r) => setTimeout(r, 300));
    await loop.tick();
    const task = await loadTask(store.db, taskId);
    expect(task).toMatchObject({ state: 'open', lease_owner: null });
    expect(await runnable(taskId)).toEqual([expect.objectContaining({ sender: expect.objectContaining({ service: 'reconciler' }), payload: { taskId, reason: 'retry' } })]);
    expect(await registry.metrics()).toMatch(/everdict_task_lease_expiries_total [1-9]/);
  });

  it('wakes a connector_down park once its backoff elapsed, and reports the oldest parked age', async () => {
    const { taskId } = await openTask();
    const claim = await claimTask(store.db, taskId, 'worker', 30_000);
    if (!claim.claimed) throw new Error('claim failed');
    await store.unitOfWork((uow) => uow.transitionTask(claim.token, { state: 'parked', parkReason: 'connector_down', parkDetail: { connector: 'billing' }, wakeAfterMs: 150 }));
    await loop.tick();
    expect((await loadTask(store.db, taskId))?.state).toBe('parked');
    expect(await registry.metrics()).toMatch(/everdict_tasks_parked_oldest_age_seconds\{park_reason="connector_down"\} [0-9.e-]+/);
    await new Promise((r) => setTimeout(r, 250));
    await loop.tick();
    expect((await loadTask(store.db, taskId))?.state).toBe('open');
    expect((await runnable(taskId)).map((m) => m.payload.reason)).toEqual(['woken']);
  });

  it('hands outbox rows whose relay claim lapsed long ago back to every relay', async () => {
    const { caseId, taskId } = await openTask();
    const env = buildEnvelope(
      { type: 'task.runnable', version: 1, caseId, lineage: { rootCaseId: caseId, parentTaskId: null, ancestry: [] }, sender: { service: 'operator', taskId: null, profile: null, profileVersion: null }, trust: 'platform', payload: { taskId, reason: 'retry' } },
      systemClock,
    );
    await store.unitOfWork((uow) => uow.enqueue({ id: env.id, type: env.type, caseId }, encodeEnvelope(env)));
    await db.query({ text: `UPDATE outbox_messages SET claimed_by = 'dead-relay', claimed_until = now() - interval '5 seconds' WHERE message_id = $1::uuid`, values: [env.id] });
    const fresh = newId();
    await store.unitOfWork((uow) => uow.enqueue({ id: fresh, type: env.type, caseId }, encodeEnvelope({ ...env, id: fresh })));
    await db.query({ text: `UPDATE outbox_messages SET claimed_by = 'live-relay', claimed_until = now() + interval '30 seconds' WHERE message_id = $1::uuid`, values: [fresh] });
    await loop.tick();
    const { rows } = await db.query<{ message_id: string; claimed_by: string | null }>({ text: 'SELECT message_id, claimed_by FROM outbox_messages WHERE message_id = ANY($1::uuid[])', values: [[env.id, fresh]] });
    expect(Object.fromEntries(rows.map((r) => [r.message_id, r.claimed_by]))).toEqual({ [env.id]: null, [fresh]: 'live-relay' });
  });
});
