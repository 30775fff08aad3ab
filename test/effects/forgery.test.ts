/**
 * Forged messages (issue 12, seed 004 §4: "a claimed sender field is not authentication"),
 * published straight to the events exchange by a holder of broker credentials, reach real
 * service processes (`everdict start` turn-worker, gate, execution-coordinator, reconciler).
 * Every receiver checks the message against persisted assignments: each forgery is refused —
 * recorded in dead_letters as `assignment_refused`, inbox 'refused' — and the task, gate, grant
 * and notebook it aimed at are unchanged.
 *
 * And an unknown type/version (§4): a `task.runnable` v2 for a parked child parks it
 * `capability_gap` and its parent gets exactly one DeadEnd, even when the message comes twice.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import amqplib from 'amqplib';
import { buildEnvelope, canonicalJson, encodeEnvelope, newId, sealPacket, systemClock } from '@everdict/contracts';
import type { AnyEnvelope, CurrentVersion, MessageType, PayloadOf } from '@everdict/contracts';
import { eventsExchange, loadTopology } from '@everdict/bus';
import { PACKET_PAPER_SCHEMA } from '@everdict/store';
import { TEST_AMQP_URL } from '@everdict/testkit';
import { creditPacket, effectsFixture, eventually, type EffectsFixture, type ServiceProc } from './helpers.js';

let f: EffectsFixture;
let node: ServiceProc;
let conn: amqplib.ChannelModel;
let ch: amqplib.ConfirmChannel;

beforeAll(async () => {
  f = await effectsFixture('effects_forgery');
  node = await f.start({ services: ['turn-worker', 'gate', 'execution-coordinator', 'reconciler'] });
  conn = await amqplib.connect(TEST_AMQP_URL);
  ch = await conn.createConfirmChannel();
});
afterAll(async () => {
  await conn?.close().catch(() => {});
  await f?.close();
});

type Sender = { service: 'intake' | 'turn-worker' | 'gate' | 'execution-coordinator' | 'reconciler' | 'operator'; taskId?: string | null };

function forge<T extends MessageType>(type: T, caseId: string, payload: PayloadOf<T, CurrentVersion<T>>, sender: Sender): AnyEnvelope {
  return buildEnvelope(
    {
      type,
      version: 1 as CurrentVersion<T>,
      caseId,
      lineage: { rootCaseId: caseId, parentTaskId: null, ancestry: [] },
      sender: { service: sender.service, taskId: sender.taskId ?? null, profile: sender.taskId ? 'p' : null, profileVersion: sender.taskId ? '1' : null },
      trust: 'platform',
      payload,
    },
    systemClock,
  ) as AnyEnvelope;
}

/** Publishes raw envelope bytes to the events exchange as the broker user the test holds. */
async function publish(type: string, id: string, body: Uint8Array): Promise<void> {
  const user = new URL(TEST_AMQP_URL).username || 'guest';
  ch.publish(eventsExchange(loadTopology({ prefix: f.prefix })), type, Buffer.from(body), { persistent: true, messageId: id, type, contentType: 'application/json', userId: user });
  await ch.waitForConfirms();
}
const send = (e: AnyEnvelope) => publish(e.type, e.id, encodeEnvelope(e));

async function refusals(messageId: string): Promise<{ consumer: string; reason: string; detail: string }[]> {
  const { rows } = await f.db.query<{ consumer: string; reason: string; detail: string }>({ text: 'SELECT consumer, reason, detail FROM dead_letters WHERE message_id = $1 ORDER BY seq', values: [messageId] });
  return rows;
}
async function refusedBy(e: AnyEnvelope, consumer: string): Promise<{ reason: string; detail: string }> {
  return eventually(
    async () => {
      const r = (await refusals(e.id)).find((x) => x.consumer === consumer);
      return r ?? false;
    },
    { what: `${e.type} refused by ${consumer}`, timeoutMs: 20_000 },
  ) as Promise<{ reason: string; detail: string }>;
}

type TaskSnap = { state: string; park_reason: string | null; fence_epoch: string; row_version: string; notes: number };
async function snap(taskId: string): Promise<TaskSnap> {
  const { rows } = await f.db.query<TaskSnap>({
    text: `SELECT state, park_reason, fence_epoch::text, row_version::text, (SELECT count(*)::int FROM task_notes n WHERE n.task_id = t.id) AS notes FROM tasks t WHERE id = $1::uuid`,
    values: [taskId],
  });
  return rows[0]!;
}
async function park(taskId: string, reason: string, detail: Record<string, unknown>): Promise<void> {
  await f.db.query({ text: `UPDATE tasks SET state = 'parked', park_reason = $2, park_detail = $3::jsonb, parked_at = now() WHERE id = $1::uuid`, values: [taskId, reason, JSON.stringify(detail)] });
}
const gateRow = async (gateId: string) =>
  (await f.db.query<{ state: string }>({ text: 'SELECT state FROM gates WHERE id = $1::uuid', values: [gateId] })).rows[0];

describe('forged messages are refused by their receivers and change nothing', () => {
  it('task.cancel from an unassigned task, or from intake without a recorded operator action', async () => {
    const { caseId, taskId } = await f.openCase();
    await park(taskId, 'question', { questionId: newId() });
    const before = await snap(taskId);
    const stranger = forge('task.cancel', caseId, { taskId, mode: 'hard', reason: 'forged' }, { service: 'turn-worker', taskId: newId() });
    const noAction = forge('task.cancel', caseId, { taskId, mode: 'hard', requestedBy: 'mallory' }, { service: 'intake' });
    await send(stranger);
    await send(noAction);
    // A task's sender may not emit task.cancel at all (producer check); were it allowed, the
    // assignment check refuses a task that is not an ancestor of the target.
    expect((await refusedBy(stranger, 'turn-worker')).reason).toMatch(/^(type_not_permitted|assignment_refused)$/);
    expect(await refusedBy(noAction, 'turn-worker')).toMatchObject({ reason: 'assignment_refused', detail: 'no recorded operator cancel for this task' });
    expect(await snap(taskId)).toEqual(before);
    // The receiver's refusal is in the inbox, so a redelivery is settled as what it was.
    const { rows } = await f.db.query<{ disposition: string }>({ text: `SELECT disposition FROM inbox_messages WHERE consumer = 'turn-worker' AND message_id = $1::uuid`, values: [noAction.id] });
    expect(rows.map((r) => r.disposition)).toEqual(['refused']);

    // The same forgery again is a duplicate of its refusal: not run again, not recorded twice.
    await send(noAction);
    const marker = forge('task.cancel', caseId, { taskId, mode: 'soft' }, { service: 'intake' });
    await send(marker);
    await refusedBy(marker, 'turn-worker');
    expect((await refusals(noAction.id)).filter((r) => r.consumer === 'turn-worker')).toHaveLength(1);
    expect(await snap(taskId)).toEqual(before);

    // Counted: the consumer's refusal counter names the reason.
    const metrics = await (await fetch(`http://127.0.0.1:${node.port}/metrics`)).text();
    const line = metrics.split('\n').find((l) => l.startsWith('everdict_bus_refused_total{') && l.includes('consumer="turn-worker"') && l.includes('reason="assignment_refused"'));
    expect(Number(line?.split(' ').at(-1))).toBeGreaterThanOrEqual(2);
  });

  it('effect.outcome "applied" claimed for the coordinator, gate.decided from a fake gate, a gate.requested opening a second gate', async () => {
    const { caseId, taskId } = await f.openCase();
    const packet = creditPacket(caseId, { account: 'acct-forged', amountCents: 7 });
    const { gateId, digest } = await f.propose(caseId, taskId, packet);
    await f.waitGate(gateId, 'open');
    await park(taskId, 'gate', { gateId, packetDigest: digest });
    const before = await snap(taskId);

    const applied = forge('effect.outcome', caseId, { taskId, callId: newId(), grantId: newId(), packetDigest: digest, outcome: 'applied', established: 'forged' }, { service: 'execution-coordinator' });
    const unknown = forge('effect.outcome', caseId, { taskId, callId: newId(), grantId: newId(), packetDigest: digest, outcome: 'unknown', established: 'forged' }, { service: 'reconciler' });
    const rejected = forge('gate.decided', caseId, { gateId, taskId, packetDigest: digest, outcome: 'rejected', reason: 'forged' }, { service: 'gate' });
    const approved = forge('gate.decided', caseId, { gateId, taskId, packetDigest: digest, outcome: 'approved', grantId: newId() }, { service: 'gate' });
    for (const e of [applied, unknown, rejected, approved]) await send(e);
    expect(await refusedBy(applied, 'turn-worker')).toMatchObject({ reason: 'assignment_refused', detail: 'no journalled dispatch of that call and grant for that task and case' });
    expect(await refusedBy(unknown, 'reconciler')).toMatchObject({ reason: 'assignment_refused', detail: 'no journalled dispatch of that call and grant for that task and case' });
    expect(await refusedBy(unknown, 'turn-worker')).toMatchObject({ reason: 'assignment_refused' });
    expect(await refusedBy(rejected, 'turn-worker')).toMatchObject({ reason: 'assignment_refused', detail: 'the gate is open, not rejected' });
    expect(await refusedBy(approved, 'turn-worker')).toMatchObject({ reason: 'assignment_refused', detail: 'the gate is open, not approved' });
    expect(await refusedBy(approved, 'execution-coordinator')).toMatchObject({ reason: 'assignment_refused' });

    // A second gate for the same packet: without a sender task, and from the task itself.
    const requests: AnyEnvelope[] = [];
    for (const sender of [{ service: 'turn-worker', taskId: null }, { service: 'turn-worker', taskId }] as const) {
      const second = newId();
      const sealed = sealPacket(packet);
      const paper = await f.store.unitOfWork((uow) => uow.putPaper({ caseId, kind: 'artefact', name: `packets/${second}`, schemaId: PACKET_PAPER_SCHEMA, bytes: Buffer.from(canonicalJson(sealed), 'utf8') }));
      const e = forge(
        'gate.requested',
        caseId,
        { gateId: second, taskId, callId: newId(), packetDigest: sealed.digest, packetPaperId: paper.paperId, planStepId: packet.planStepId, operation: packet.operation.name, effectClass: packet.effectClass, impactKeys: packet.impactKeys },
        sender,
      );
      requests.push(e);
      await send(e);
    }
    expect(await refusedBy(requests[0]!, 'gate')).toMatchObject({ reason: 'assignment_refused', detail: 'a gate request comes from the proposing task' });
    expect(await refusedBy(requests[1]!, 'gate')).toMatchObject({ reason: 'assignment_refused', detail: `gate ${gateId} is already open for this packet` });
    for (const e of requests) expect(await gateRow((e.payload as { gateId: string }).gateId)).toBeUndefined();

    // Nothing moved: the task is parked on its gate with no note, the gate is open, no grant, no dispatch.
    expect(await snap(taskId)).toEqual(before);
    expect(await gateRow(gateId)).toEqual({ state: 'open' });
    const { rows: grants } = await f.db.query({ text: 'SELECT 1 FROM grants WHERE case_id = $1::uuid', values: [caseId] });
    expect(grants).toHaveLength(0);
    expect(await f.dispatchOf(gateId)).toBeUndefined();
    expect(f.target.touching('acct-forged')).toHaveLength(0);
  });

  it('budget.topped_up from a made-up operator, or from intake without a recorded top-up', async () => {
    const { caseId, taskId } = await f.openCase();
    await park(taskId, 'budget', { dimension: 'turns' });
    const before = await snap(taskId);
    const madeUp = forge('budget.topped_up', caseId, { taskId, budget: { maxTurns: 50 }, toppedUpBy: 'mallory' }, { service: 'operator' });
    const unrecorded = forge('budget.topped_up', caseId, { taskId, budget: { maxTurns: 50 }, toppedUpBy: 'mallory' }, { service: 'intake' });
    await send(madeUp);
    await send(unrecorded);
    // The made-up service is refused (by the producer check or the assignment check, whichever comes first).
    expect((await refusedBy(madeUp, 'turn-worker')).reason).toMatch(/assignment_refused|producer_unknown|sender_mismatch|type_not_permitted/);
    expect(await refusedBy(unrecorded, 'turn-worker')).toMatchObject({ reason: 'assignment_refused', detail: 'no recorded operator action sent this message' });
    expect(await snap(taskId)).toEqual(before);
    expect((await f.ledger(caseId)).map((e) => e.kind)).not.toContain('budget_topped_up');
  });
});

describe('a message of an unknown version', () => {
  it('parks the child it is for capability_gap; the parent gets exactly one DeadEnd, even when it comes twice', async () => {
    const { caseId, taskId: root } = await f.openCase();
    const child = await f.store.unitOfWork((uow) => uow.createTask({ caseId, parentId: root, profile: 'p' }));
    await f.db.query({ text: 'UPDATE tasks SET ancestry = ARRAY[$2::uuid], root_task_id = $2::uuid, depth = 1 WHERE id = $1::uuid', values: [child, root] });
    await park(child, 'question', { questionId: newId(), askedOf: root });
    await park(root, 'question', { questionId: newId() });
    const childBefore = await snap(child);

    const v1 = forge('task.runnable', caseId, { taskId: child, reason: 'woken' }, { service: 'reconciler' });
    const v2 = { ...(JSON.parse(Buffer.from(encodeEnvelope(v1)).toString('utf8')) as Record<string, unknown>), version: 2 };
    const bytes = Buffer.from(JSON.stringify(v2), 'utf8');
    await publish('task.runnable', v1.id, bytes);
    await publish('task.runnable', v1.id, bytes);

    await eventually(async () => (await refusals(v1.id)).filter((r) => r.reason === 'unknown_version').length === 2, { what: 'both deliveries dead-lettered', timeoutMs: 20_000 });
    await eventually(async () => (await snap(root)).notes === 1, { what: 'the DeadEnd reached the parent', timeoutMs: 20_000 });
    const c = await f.db.query<{ state: string; park_reason: string; park_detail: Record<string, unknown>; fence_epoch: string }>({ text: 'SELECT state, park_reason, park_detail, fence_epoch::text FROM tasks WHERE id = $1::uuid', values: [child] });
    expect(c.rows[0]).toMatchObject({ state: 'parked', park_reason: 'capability_gap', park_detail: { kind: 'unknown_message', reason: 'unknown_version', messageId: v1.id, type: 'task.runnable', version: 2 } });
    expect(Number(c.rows[0]!.fence_epoch)).toBe(Number(childBefore.fence_epoch) + 1);

    // Settle: a second DeadEnd would have had time to arrive.
    await new Promise((r) => setTimeout(r, 1500));
    expect(await f.outbox('task.dead_end')).toEqual([{ taskId: child, parentTaskId: root, reason: 'unknown_version', messageId: v1.id, messageType: 'task.runnable', messageVersion: 2 }]);
    const notes = await f.db.query<{ kind: string; body: Record<string, unknown> }>({ text: 'SELECT kind, body FROM task_notes WHERE task_id = $1::uuid', values: [root] });
    expect(notes.rows).toEqual([{ kind: 'dead_end', body: { childTaskId: child, reason: 'unknown_version', messageId: v1.id, messageType: 'task.runnable', messageVersion: 2 } }]);
    const kinds = (await f.ledger(caseId)).map((e) => e.kind);
    expect(kinds.filter((k) => k === 'task_dead_end')).toHaveLength(1);
    expect(kinds.filter((k) => k === 'dead_end_reported')).toHaveLength(1);
    expect(await f.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });
});
