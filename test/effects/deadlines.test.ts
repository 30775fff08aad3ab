/**
 * Durable deadlines and their escalation (issue 13 item 6), against a real reconciler process:
 * a gate or a question past its deadline (created_at + the case type's afterMs, database clock)
 * escalates exactly as its case type declares — notify a role, re-ask once, park for an operator —
 * each escalation ledgered `escalated` once and announced on the escalation channel. A gate whose
 * expiry comes first still simply expires.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import { PrincipalDirectory } from '@everdict/http-api';
import { intakeApi } from '@everdict/intake';
import { ESCALATION_CHANNEL } from '@everdict/store';
import { TOKENS, creditPacket, effectsFixture, eventually, type EffectsFixture } from './helpers.js';

let f: EffectsFixture;
let server: Server | undefined;
let intakeUrl: string;
const announced: string[] = [];
let unlisten: (() => Promise<void>) | undefined;

beforeAll(async () => {
  f = await effectsFixture('effects_deadlines');
  const path = join(f.dir, 'fleet.json');
  const fleet = JSON.parse(readFileSync(path, 'utf8')) as FleetConfig;
  const t = fleet.caseTypes['t']!;
  fleet.caseTypes['t'] = {
    ...t,
    escalation: { gate: { afterMs: 1000, action: 'notify_role', role: 'dba' }, question: { afterMs: 1000, action: 'reask' } },
  };
  // `u` escalates gates to an operator and declares nothing for questions.
  fleet.caseTypes['u'] = { ...t, escalation: { gate: { afterMs: 1000, action: 'park_for_operator' } } };
  writeFileSync(path, JSON.stringify(fleet, null, 2));
  // The case view as intake's API answers it, on the same database.
  const api = intakeApi({ store: f.store, fleet: () => fleet, principals: () => new PrincipalDirectory(fleet.principals), metrics: { opened: () => {}, refused: () => {} } });
  server = createServer((req, res) => {
    Promise.resolve(api(req, res)).then(
      (handled: boolean) => {
        if (!handled) res.writeHead(404).end();
      },
      (err: unknown) => res.writeHead(500).end(String(err)),
    );
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
  intakeUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  unlisten = await f.db.listen(ESCALATION_CHANNEL, (caseId) => announced.push(caseId));
  await f.start({ services: ['gate', 'reconciler'] });
});
afterAll(async () => {
  await new Promise((r) => server?.close(r));
  await unlisten?.();
  await f?.close();
});

async function openCase(caseType: string): Promise<{ caseId: string; taskId: string }> {
  return f.store.unitOfWork(async (uow) => {
    const { caseId } = await uow.openCase({ caseType, originKey: `deadlines:${newId()}`, customer: 'acme', title: 'deadlines' });
    const taskId = await uow.createTask({ caseId, profile: 'p' });
    return { caseId, taskId };
  });
}

/** What the turn-worker does when its task waits (the waiting itself is not under test here). */
async function park(taskId: string, reason: 'question' | 'gate'): Promise<void> {
  await f.db.query({ text: `UPDATE tasks SET state = 'parked', park_reason = $2::text, parked_at = now() WHERE id = $1::uuid`, values: [taskId, reason] });
}

async function ask(caseId: string, taskId: string): Promise<string> {
  const id = newId();
  await f.db.query({
    text: `INSERT INTO questions (id, case_id, task_id, gap, decision_needed) VALUES ($1::uuid, $2::uuid, $3::uuid, 'which account', 'pick one')`,
    values: [id, caseId, taskId],
  });
  await park(taskId, 'question');
  return id;
}

const caseView = async (caseId: string) => {
  const r = await fetch(`${intakeUrl}/v1/cases/${caseId}`, { headers: { authorization: `Bearer ${TOKENS.olga}` } });
  expect(r.status).toBe(200);
  return (await r.json()) as { gates: Record<string, unknown>[]; questions: Record<string, unknown>[]; awaitingOperator: Record<string, unknown>[] };
};

const escalations = async (caseId: string) => (await f.ledger(caseId)).filter((r) => r.kind === 'escalated').map((r) => r.body);

const row = async (table: 'gates' | 'questions', id: string) =>
  (await f.db.query<{ deadline_at: Date | null; created_at: Date; escalations: number; state?: string; after_ms: number }>({
    text: `SELECT *, (extract(epoch FROM deadline_at - created_at) * 1000)::int AS after_ms FROM ${table} WHERE id = $1::uuid`,
    values: [id],
  })).rows[0]!;

const parkDetail = async (taskId: string) =>
  (await f.db.query<{ state: string; park_reason: string | null; park_detail: Record<string, unknown> | null }>({ text: 'SELECT state, park_reason, park_detail FROM tasks WHERE id = $1::uuid', values: [taskId] })).rows[0]!;

/** Several reconciler ticks (200 ms apart) pass: long enough for a second escalation to show. */
const settle = () => new Promise((r) => setTimeout(r, 1500));

describe('deadlines', () => {
  it('a gate past its deadline notifies the configured role once; it stays open until it expires', async () => {
    const { caseId, taskId } = await openCase('t');
    const { gateId } = await f.propose(caseId, taskId, creditPacket(caseId, { account: 'acct-dl-1', amountCents: 5 }), { expiresAt: new Date(Date.now() + 120_000).toISOString() });
    await f.waitGate(gateId, 'open');
    await eventually(async () => (await escalations(caseId)).length > 0, { timeoutMs: 20_000, what: 'gate escalated' });
    await settle();
    const recs = await escalations(caseId);
    expect(recs).toEqual([expect.objectContaining({ subject: 'gate', gateId, taskId, action: 'notify_role', role: 'dba' })]);
    const g = await row('gates', gateId);
    expect(g).toMatchObject({ state: 'open', escalations: 1, after_ms: 1000 });
    expect(new Date(String(recs[0]!['deadlineAt'])).getTime()).toBe(g.deadline_at!.getTime());
    expect(announced).toContain(caseId);
    expect(await f.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });

  it('a gate of a case type that parks for an operator marks the waiting task with the reason', async () => {
    const { caseId, taskId } = await openCase('u');
    await park(taskId, 'gate');
    const { gateId } = await f.propose(caseId, taskId, creditPacket(caseId, { account: 'acct-dl-2', amountCents: 5 }), { expiresAt: new Date(Date.now() + 120_000).toISOString() });
    await eventually(async () => (await escalations(caseId)).length > 0, { timeoutMs: 20_000, what: 'gate escalated' });
    await settle();
    expect(await escalations(caseId)).toEqual([expect.objectContaining({ subject: 'gate', gateId, action: 'park_for_operator', taskParked: true })]);
    const task = await parkDetail(taskId);
    expect(task).toMatchObject({ state: 'parked', park_reason: 'gate' });
    expect(task.park_detail?.['operator']).toMatchObject({ reason: 'the gate was not decided by its deadline' });
    const v = await caseView(caseId);
    expect(v.awaitingOperator).toEqual([expect.objectContaining({ taskId, reason: 'the gate was not decided by its deadline' })]);
    expect(v.gates).toEqual([expect.objectContaining({ id: gateId, state: 'open', escalations: 1, deadlineAt: expect.any(String) })]);
  });

  it('a gate that expires before its deadline only expires (the expiry path is unchanged)', async () => {
    const { caseId, taskId } = await openCase('t');
    const { gateId } = await f.propose(caseId, taskId, creditPacket(caseId, { account: 'acct-dl-3', amountCents: 5 }), { expiresAt: new Date(Date.now() + 300).toISOString() });
    await f.waitGate(gateId, 'expired');
    await eventually(async () => (await f.outbox('gate.decided')).some((p) => p['gateId'] === gateId && p['outcome'] === 'expired'), { what: 'gate.decided expired' });
    await settle();
    expect(await escalations(caseId)).toEqual([]);
    expect((await f.ledger(caseId)).map((r) => r.kind)).toContain('gate_expired');
  });

  it('a question past its deadline is re-asked once, then parked for an operator; a case type without a rule never escalates', async () => {
    const { caseId, taskId } = await openCase('t');
    const questionId = await ask(caseId, taskId);
    await eventually(async () => (await escalations(caseId)).length >= 2, { timeoutMs: 20_000, what: 'question re-asked, then escalated' });
    await settle();
    const [reask, parked, ...more] = await escalations(caseId);
    expect(more).toEqual([]);
    expect(reask).toMatchObject({ subject: 'question', questionId, taskId, action: 'reask' });
    expect(new Date(String(reask!['newDeadlineAt'])).getTime()).toBeGreaterThan(new Date(String(reask!['deadlineAt'])).getTime());
    expect(parked).toMatchObject({ subject: 'question', questionId, action: 'park_for_operator', taskParked: true, deadlineAt: reask!['newDeadlineAt'] });
    expect((await parkDetail(taskId)).park_detail?.['operator']).toMatchObject({ reason: 'the question was not answered by its deadline, nor after it was asked again' });
    expect(await row('questions', questionId)).toMatchObject({ escalations: 2 });
    const v = await caseView(caseId);
    expect(v.questions).toEqual([expect.objectContaining({ id: questionId, open: true, escalations: 2, deadlineAt: reask!['newDeadlineAt'] })]);
    expect(v.awaitingOperator).toEqual([expect.objectContaining({ taskId })]);

    const quiet = await openCase('u');
    const quietQuestion = await ask(quiet.caseId, quiet.taskId);
    await settle();
    expect(await escalations(quiet.caseId)).toEqual([]);
    expect(await row('questions', quietQuestion)).toMatchObject({ deadline_at: null, escalations: 0 });
  });

  it('an answered question does not escalate', async () => {
    const { caseId, taskId } = await openCase('t');
    const questionId = newId();
    await f.db.query({
      text: `INSERT INTO questions (id, case_id, task_id, gap, decision_needed, answer, answered_by, answered_at) VALUES ($1::uuid, $2::uuid, $3::uuid, 'g', 'd', 'yes', 'alice', now())`,
      values: [questionId, caseId, taskId],
    });
    await settle();
    expect(await escalations(caseId)).toEqual([]);
  });
});
