/** Valid sample payloads for every registered message type (type-checked against the generated types). */
import type { MessageLineage, MessageSender, MessageType, PayloadOf } from '../src/index.js';

export const CASE_ID = '01900000-0000-7000-8000-000000000001';
export const ROOT_TASK = '01900000-0000-7000-8000-000000000010';
export const CHILD_TASK = '01900000-0000-7000-8000-000000000011';
const GATE = '01900000-0000-7000-8000-000000000020';
const GRANT = '01900000-0000-7000-8000-000000000021';
const CALL = '01900000-0000-7000-8000-000000000030';
const PAPER = '01900000-0000-7000-8000-000000000040';
const QUESTION = '01900000-0000-7000-8000-000000000050';
const DIGEST = `sha256:${'ab'.repeat(32)}`;

export const CHILD_LINEAGE: MessageLineage = { rootCaseId: CASE_ID, parentTaskId: ROOT_TASK, ancestry: [ROOT_TASK] };
export const ROOT_LINEAGE: MessageLineage = { rootCaseId: CASE_ID, parentTaskId: null, ancestry: [] };
export const WORKER_SENDER: MessageSender = { service: 'turn-worker', taskId: CHILD_TASK, profile: 'support.triage', profileVersion: '3' };

export const SAMPLE_PAYLOADS: { [T in MessageType]: PayloadOf<T> } = {
  'task.runnable': { taskId: CHILD_TASK, reason: 'opened' },
  'plan.submitted': {
    taskId: CHILD_TASK,
    parentTaskId: ROOT_TASK,
    revision: 2,
    expectedRevision: 1,
    rowVersion: 7,
    planPaperId: PAPER,
    planHash: DIGEST,
    summary: 'Reproduce, fix, verify.',
    steps: [
      { stepId: 'reproduce', title: 'Reproduce the fault', dependsOn: [] },
      { stepId: 'fix', title: 'Apply the fix', dependsOn: ['reproduce'], profile: 'dev.fixer', assertion: 'ticket status is resolved' },
    ],
  },
  'gate.requested': {
    gateId: GATE,
    taskId: CHILD_TASK,
    callId: CALL,
    packetDigest: DIGEST,
    packetPaperId: PAPER,
    planStepId: 'fix',
    operation: 'tickets.add_comment',
    effectClass: 'send',
    requiredDecisions: ['HW-send'],
    impactKeys: ['env:qa/system:tickets'],
    summary: 'Post the resolution comment',
    expiresAt: '2026-09-03T12:00:00.000Z',
  },
  'gate.decided': { gateId: GATE, taskId: CHILD_TASK, packetDigest: DIGEST, outcome: 'approved', grantId: GRANT, expiresAt: '2026-09-04T12:00:00Z' },
  'effect.outcome': {
    taskId: CHILD_TASK,
    callId: CALL,
    grantId: GRANT,
    packetDigest: DIGEST,
    outcome: 'applied',
    established: 'idempotency receipt returned by the target',
    receipt: { commentId: 'c-17', requestId: 'r-9' },
  },
  'question.answered': { questionId: QUESTION, taskId: CHILD_TASK, answer: 'Use the staging account.', chosenAlternative: 'b', answeredBy: 'alice@ops' },
  'task.cancel': { taskId: CHILD_TASK, mode: 'hard', reason: 'customer withdrew', requestedBy: 'bob' },
  'task.finished': { taskId: CHILD_TASK, parentTaskId: ROOT_TASK, outcome: 'done', resultPaperId: PAPER, summary: 'Fixed.' },
  'question.raised': {
    questionId: QUESTION,
    taskId: CHILD_TASK,
    parentTaskId: ROOT_TASK,
    reason: 'the target is ambiguous',
    gap: 'which account to credit',
    checked: 'both accounts exist',
    dependsOn: 'the credit step',
    alternatives: ['a: the main account', 'b: the staging account'],
    decisionNeeded: 'choose the account',
  },
  'task.resume': { taskId: CHILD_TASK, reason: 'soft stop lifted', requestedBy: 'olga' },
  'budget.topped_up': { taskId: CHILD_TASK, budget: { maxTurns: 5, maxActiveMinutes: 30 }, toppedUpBy: 'olga', reason: 'more pages to read' },
  'task.dead_end': { taskId: CHILD_TASK, parentTaskId: ROOT_TASK, reason: 'unknown_version', messageId: '0190a000-0000-7000-8000-0000000000ff', messageType: 'task.runnable', messageVersion: 2 },
};
