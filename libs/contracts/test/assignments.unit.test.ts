import { describe, expect, it } from 'vitest';
import { cancelRefusal, effectOutcomeRefusal, gateRequestRefusal, gateVerdictRefusal, operatorActionOf, operatorControlRefusal } from '../src/assignments.js';
import type { GateFacts, GateRequestFacts, GateVerdictClaim } from '../src/assignments.js';

const D = `sha256:${'a'.repeat(64)}`;
const gate = (o: Partial<GateFacts> = {}): GateFacts => ({
  case_id: 'c',
  task_id: 't',
  packet_digest: D,
  state: 'open',
  required_decisions: [{ decision: 'HW-payment' }, { decision: 'finance' }],
  reason: null,
  decisions: [],
  ...o,
});
const claim = (o: Partial<GateVerdictClaim> = {}): GateVerdictClaim => ({ senderService: 'gate', caseId: 'c', taskId: 't', packetDigest: D, outcome: 'approved', ...o });
const approve = (decision: string, digest = D) => ({ decision, verdict: 'approve', digest });

describe('gateVerdictRefusal', () => {
  it('an approval stands only when every required decision was approved for the gate digest', () => {
    const both = [approve('HW-payment'), approve('finance')];
    expect(gateVerdictRefusal(claim(), gate({ state: 'approved', decisions: both }))).toBeNull();
    expect(gateVerdictRefusal(claim(), gate({ state: 'revoked', decisions: both }))).toBeNull(); // revoked after approval
    expect(gateVerdictRefusal(claim(), gate({ state: 'open', decisions: both }))).toMatch(/open, not approved/);
    expect(gateVerdictRefusal(claim(), gate({ state: 'approved', decisions: [approve('HW-payment')] }))).toMatch(/finance was not approved/);
    expect(gateVerdictRefusal(claim(), gate({ state: 'approved', decisions: [approve('HW-payment'), approve('finance', `sha256:${'b'.repeat(64)}`)] }))).toMatch(/finance/);
    expect(gateVerdictRefusal(claim(), gate({ state: 'revoked', decisions: [approve('HW-payment')] }))).toMatch(/finance/);
  });

  it('a rejection needs a recorded reject (or a refusal at request); expiry and revocation need the state', () => {
    expect(gateVerdictRefusal(claim({ outcome: 'rejected' }), gate())).toMatch(/open, not rejected/);
    expect(gateVerdictRefusal(claim({ outcome: 'rejected' }), gate({ state: 'rejected' }))).toMatch(/no reject/);
    expect(gateVerdictRefusal(claim({ outcome: 'rejected' }), gate({ state: 'rejected', decisions: [{ decision: 'finance', verdict: 'reject', digest: D }] }))).toBeNull();
    expect(gateVerdictRefusal(claim({ outcome: 'rejected' }), gate({ state: 'rejected', required_decisions: [], reason: 'gate refused: no paper' }))).toBeNull();
    expect(gateVerdictRefusal(claim({ outcome: 'expired', senderService: 'reconciler' }), gate({ state: 'expired' }))).toBeNull();
    expect(gateVerdictRefusal(claim({ outcome: 'expired', senderService: 'reconciler' }), gate())).toMatch(/not expired/);
    expect(gateVerdictRefusal(claim({ outcome: 'revoked' }), gate({ state: 'revoked' }))).toBeNull();
  });

  it('names the sender, gate, task, case and digest it checks', () => {
    const ok = gate({ state: 'approved', decisions: [approve('HW-payment'), approve('finance')] });
    expect(gateVerdictRefusal(claim({ senderService: 'reconciler' }), ok)).toMatch(/reconciler does not close gates as approved/);
    expect(gateVerdictRefusal(claim({ senderService: 'turn-worker', outcome: 'rejected' }), ok)).toMatch(/turn-worker/);
    expect(gateVerdictRefusal(claim(), undefined)).toBe('no such gate');
    expect(gateVerdictRefusal(claim({ taskId: 'other' }), ok)).toMatch(/another task/);
    expect(gateVerdictRefusal(claim({ caseId: 'other' }), ok)).toMatch(/another task or case/);
    expect(gateVerdictRefusal(claim({ packetDigest: `sha256:${'c'.repeat(64)}` }), ok)).toMatch(/digest/);
  });
});

describe('effect outcomes, cancels and operator controls', () => {
  it('an outcome needs its journalled dispatch and a reporting service', () => {
    expect(effectOutcomeRefusal('execution-coordinator', true)).toBeNull();
    expect(effectOutcomeRefusal('reconciler', true)).toBeNull();
    expect(effectOutcomeRefusal('execution-coordinator', false)).toMatch(/no journalled dispatch/);
    expect(effectOutcomeRefusal('gate', true)).toMatch(/gate does not report/);
  });

  it('a cancel comes from intake on a recorded action or from an ancestor of the same case', () => {
    const target = { case_id: 'c', ancestry: ['root', 'mid'] };
    const none = { operatorActionRecorded: false, senderTaskCase: null };
    expect(cancelRefusal({ senderService: 'intake', senderTaskId: null, caseId: 'c' }, target, { ...none, operatorActionRecorded: true })).toBeNull();
    expect(cancelRefusal({ senderService: 'intake', senderTaskId: null, caseId: 'c' }, target, none)).toMatch(/no recorded operator cancel/);
    expect(cancelRefusal({ senderService: 'operator', senderTaskId: null, caseId: 'c' }, target, { ...none, operatorActionRecorded: true })).toMatch(/operator does not cancel/);
    expect(cancelRefusal({ senderService: 'turn-worker', senderTaskId: 'mid', caseId: 'c' }, target, { ...none, senderTaskCase: 'c' })).toBeNull();
    expect(cancelRefusal({ senderService: 'turn-worker', senderTaskId: 'sibling', caseId: 'c' }, target, { ...none, senderTaskCase: 'c' })).toMatch(/not an ancestor/);
    expect(cancelRefusal({ senderService: 'turn-worker', senderTaskId: 'mid', caseId: 'c' }, target, { ...none, senderTaskCase: 'x' })).toMatch(/case/);
    expect(cancelRefusal({ senderService: 'gate', senderTaskId: 'mid', caseId: 'c' }, target, { ...none, senderTaskCase: 'c' })).toMatch(/gate does not cancel/);
  });

  it('operator controls come from intake with their action recorded, which names the message', () => {
    expect(operatorControlRefusal('intake', true)).toBeNull();
    expect(operatorControlRefusal('intake', false)).toMatch(/no recorded operator action/);
    expect(operatorControlRefusal('operator', true)).toMatch(/operator does not speak/);
    expect(operatorActionOf('budget.topped_up', { taskId: 't' }, 'm')).toEqual({ kind: 'budget_top_up_requested', match: { taskId: 't', messageId: 'm' } });
    expect(operatorActionOf('task.resume', { taskId: 't' }, 'm')).toEqual({ kind: 'case_resume_requested', match: { rootTaskId: 't', messageId: 'm' } });
    expect(operatorActionOf('task.cancel', { taskId: 't', mode: 'hard', requestedBy: 'olga' }, 'm')).toEqual({ kind: 'case_cancel_requested', match: { rootTaskId: 't', mode: 'hard', requestedBy: 'olga' } });
    expect(operatorActionOf('gate.decided', { taskId: 't' }, 'm')).toBeUndefined();
  });
});

describe('gateRequestRefusal', () => {
  const facts = (o: Partial<GateRequestFacts> = {}): GateRequestFacts => ({
    senderService: 'turn-worker',
    senderTaskId: 't',
    taskId: 't',
    gateId: 'g',
    taskCase: 'c',
    caseId: 'c',
    paper: { case_id: 'c', name: 'packets/g' },
    otherOpenGate: null,
    ...o,
  });
  it('only the named task, for the paper it wrote for this gate, and one open gate per packet', () => {
    expect(gateRequestRefusal(facts())).toBeNull();
    expect(gateRequestRefusal(facts({ senderTaskId: null }))).toMatch(/proposing task/);
    expect(gateRequestRefusal(facts({ senderService: 'gate' }))).toMatch(/proposing task/);
    expect(gateRequestRefusal(facts({ senderTaskId: 'other' }))).toMatch(/not the task/);
    expect(gateRequestRefusal(facts({ taskCase: null }))).toMatch(/not of that case/);
    expect(gateRequestRefusal(facts({ taskCase: 'x' }))).toMatch(/not of that case/);
    expect(gateRequestRefusal(facts({ paper: null }))).toMatch(/packet paper/);
    expect(gateRequestRefusal(facts({ paper: { case_id: 'c', name: 'packets/other' } }))).toMatch(/packet paper/);
    expect(gateRequestRefusal(facts({ paper: { case_id: 'x', name: 'packets/g' } }))).toMatch(/packet paper/);
    expect(gateRequestRefusal(facts({ otherOpenGate: 'g0' }))).toMatch(/g0 is already open/);
  });
});

describe('an unknown version names its target without its payload being read', () => {
  it('salvages payload.taskId and the payload hash only when well-formed', async () => {
    const { buildEnvelope, decodeMessage, encodeEnvelope } = await import('../src/envelope.js');
    const { systemClock } = await import('../src/clock.js');
    const taskId = '01900000-0000-7000-8000-000000000011';
    const caseId = '01900000-0000-7000-8000-000000000001';
    const env = buildEnvelope(
      { type: 'task.runnable', version: 1, caseId, lineage: { rootCaseId: caseId, parentTaskId: null, ancestry: [] }, sender: { service: 'reconciler', taskId: null, profile: null, profileVersion: null }, trust: 'platform', payload: { taskId, reason: 'woken' } },
      systemClock,
    );
    const wire = JSON.parse(Buffer.from(encodeEnvelope(env)).toString('utf8')) as Record<string, unknown>;
    const v2 = decodeMessage(Buffer.from(JSON.stringify({ ...wire, version: 2 })), { maxBytes: 1 << 20 });
    expect(v2).toMatchObject({ ok: false, reason: 'unknown_version', messageId: env.id, caseId, version: 2, targetTaskId: taskId, payloadHash: env.payloadHash });
    const odd = decodeMessage(Buffer.from(JSON.stringify({ ...wire, version: 2, payload: { taskId: 'not-an-id' } })), { maxBytes: 1 << 20 });
    expect(odd.ok).toBe(false);
    expect(odd).not.toHaveProperty('targetTaskId');
  });
});
