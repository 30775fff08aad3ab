/**
 * The turn-worker's persisted-assignment checks (seed 004 §4), one per message type that acts
 * on a task it does not hold: the facts are read in the delivery's unit of work, the decision is
 * contracts' (pure). Each returns null (apply) or the reason the message is refused.
 */
import { cancelRefusal, effectOutcomeRefusal, gateVerdictRefusal, operatorActionOf, operatorControlRefusal } from '@everdict/contracts';
import type { AnyEnvelope } from '@everdict/contracts';
import { hasLedgerRecord, journalledDispatch, loadGateRecord, loadTask } from '@everdict/store';
import type { TaskRow, UnitOfWork } from '@everdict/store';

type Of<T extends AnyEnvelope['type']> = Extract<AnyEnvelope, { type: T }>;

/** `effect.outcome`: a journalled dispatch of that call and grant, for that task and case. */
export async function checkEffectOutcome(uow: UnitOfWork, e: Of<'effect.outcome'>): Promise<string | null> {
  const p = e.payload;
  const journalled = await journalledDispatch(uow, { caseId: e.caseId, taskId: p.taskId, callId: p.callId, grantId: p.grantId });
  return effectOutcomeRefusal(e.sender.service, journalled);
}

/** `gate.decided`: the gate's recorded state and decisions say so. */
export async function checkGateDecided(uow: UnitOfWork, e: Of<'gate.decided'>): Promise<string | null> {
  const p = e.payload;
  const gate = await loadGateRecord(uow, p.gateId);
  return gateVerdictRefusal({ senderService: e.sender.service, caseId: e.caseId, taskId: p.taskId, packetDigest: p.packetDigest, outcome: p.outcome }, gate);
}

async function operatorActionRecorded(uow: UnitOfWork, e: Of<'task.cancel'> | Of<'task.resume'> | Of<'budget.topped_up'>): Promise<boolean> {
  const action = operatorActionOf(e.type, e.payload, e.id);
  return action !== undefined && (await hasLedgerRecord(uow, e.caseId, action.kind, action.match));
}

/** `task.cancel`: intake on a recorded operator action, or an ancestor task of the target. */
export async function checkCancel(uow: UnitOfWork, e: Of<'task.cancel'>, target: TaskRow): Promise<string | null> {
  const senderTaskId = e.sender.taskId;
  const sender = senderTaskId === null ? undefined : await loadTask(uow, senderTaskId);
  const recorded = senderTaskId === null && e.sender.service === 'intake' ? await operatorActionRecorded(uow, e) : false;
  return cancelRefusal({ senderService: e.sender.service, senderTaskId, caseId: e.caseId }, target, { operatorActionRecorded: recorded, senderTaskCase: sender?.case_id ?? null });
}

/** `budget.topped_up` and `task.resume`: intake on a recorded operator action. */
export async function checkOperatorControl(uow: UnitOfWork, e: Of<'task.resume'> | Of<'budget.topped_up'>): Promise<string | null> {
  const recorded = e.sender.service === 'intake' && e.sender.taskId === null ? await operatorActionRecorded(uow, e) : false;
  return operatorControlRefusal(e.sender.service, recorded);
}
