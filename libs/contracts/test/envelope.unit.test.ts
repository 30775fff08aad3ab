import { describe, expect, it } from 'vitest';
import {
  DECODE_REASONS,
  type EverdictError,
  MESSAGE_TYPE_NAMES,
  buildEnvelope,
  checkEnvelope,
  decodeMessage,
  encodeEnvelope,
  isEverdictError,
  manualClock,
  payloadHash,
  type DecodeResult,
  type MessageType,
} from '@everdict/contracts';
import { CASE_ID, CHILD_LINEAGE, CHILD_TASK, ROOT_LINEAGE, ROOT_TASK, SAMPLE_PAYLOADS, WORKER_SENDER } from './samples.js';

const clock = manualClock('2026-09-02T10:00:00.000Z');
const LIMIT = { maxBytes: 64 * 1024 };
const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

function sampleEnvelope<T extends MessageType>(type: T) {
  return buildEnvelope({ type, version: 1, caseId: CASE_ID, lineage: CHILD_LINEAGE, sender: WORKER_SENDER, trust: 'agent', payload: SAMPLE_PAYLOADS[type], traceparent: TRACEPARENT }, clock);
}

/** Wire bytes of a valid task.runnable envelope after `mutate`; `restamp` recomputes payloadHash. */
const BASE = sampleEnvelope('task.runnable');
function tampered(mutate: (env: Record<string, unknown>) => void, restamp = true): Buffer {
  const env = JSON.parse(encodeEnvelope(BASE).toString('utf8')) as Record<string, unknown>;
  mutate(env);
  if (restamp) env['payloadHash'] = payloadHash(env['payload']);
  return Buffer.from(JSON.stringify(env), 'utf8');
}

function expectFailure(result: DecodeResult, reason: (typeof DECODE_REASONS)[number]) {
  if (result.ok) throw new Error(`expected ${reason}, but the message decoded`);
  expect(result.reason).toBe(reason);
  return result;
}

describe('buildEnvelope → encodeEnvelope → decodeMessage', () => {
  it('has a valid sample for every registered message type', () => {
    expect(Object.keys(SAMPLE_PAYLOADS).sort()).toEqual([...MESSAGE_TYPE_NAMES]);
    expect(MESSAGE_TYPE_NAMES).toEqual(
      ['budget.topped_up', 'effect.outcome', 'gate.decided', 'gate.requested', 'plan.submitted', 'question.answered', 'question.raised', 'task.cancel', 'task.dead_end', 'task.finished', 'task.resume', 'task.runnable'],
    );
  });

  it.each(MESSAGE_TYPE_NAMES.map((t) => [t]))('round-trips %s', (type) => {
    const env = sampleEnvelope(type);
    expect(env.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(env.createdAt).toBe('2026-09-02T10:00:00.000Z');
    expect(env.payloadHash).toBe(payloadHash(SAMPLE_PAYLOADS[type]));
    const decoded = decodeMessage(encodeEnvelope(env), LIMIT);
    if (!decoded.ok) throw new Error(`${decoded.reason}: ${decoded.detail}`);
    expect(decoded.envelope).toEqual(env);
    expect(decoded.envelope.payload).toEqual(SAMPLE_PAYLOADS[type]);
  });

  it('narrows the payload type by message type', () => {
    const decoded = decodeMessage(encodeEnvelope(sampleEnvelope('task.cancel')), LIMIT);
    if (!decoded.ok || decoded.envelope.type !== 'task.cancel') throw new Error('expected a task.cancel');
    const mode: 'hard' | 'soft' = decoded.envelope.payload.mode;
    expect(mode).toBe('hard');
  });

  it('encodes canonically: the same envelope always has the same bytes', () => {
    const env = sampleEnvelope('plan.submitted');
    const shuffled = Object.fromEntries(Object.entries(env).reverse()) as typeof env;
    expect(encodeEnvelope(shuffled).equals(encodeEnvelope(env))).toBe(true);
  });

  it('omits traceparent when none is given and stamps a fresh id each time', () => {
    const draft = { type: 'task.runnable', version: 1, caseId: CASE_ID, lineage: ROOT_LINEAGE, sender: { service: 'intake', taskId: null, profile: null, profileVersion: null }, trust: 'platform', payload: SAMPLE_PAYLOADS['task.runnable'] } as const;
    const a = buildEnvelope(draft, clock);
    const b = buildEnvelope(draft, clock);
    expect('traceparent' in a).toBe(false);
    expect(a.id).not.toBe(b.id);
    expect(a.payloadHash).toBe(b.payloadHash);
  });

  it('copies the payload, so a later change to the caller object cannot break payloadHash', () => {
    const payload = { taskId: CHILD_TASK, reason: 'opened' as const };
    const env = buildEnvelope({ type: 'task.runnable', version: 1, caseId: CASE_ID, lineage: CHILD_LINEAGE, sender: WORKER_SENDER, trust: 'agent', payload }, clock);
    (payload as { reason: string }).reason = 'retry';
    expect(env.payload.reason).toBe('opened');
    expect(decodeMessage(encodeEnvelope(env), LIMIT).ok).toBe(true);
  });
});

describe('buildEnvelope refusals', () => {
  const base = { version: 1, caseId: CASE_ID, lineage: CHILD_LINEAGE, sender: WORKER_SENDER, trust: 'agent' } as const;

  function thrown(fn: () => unknown): EverdictError {
    try {
      fn();
    } catch (err) {
      if (isEverdictError(err)) return err;
      throw err;
    }
    throw new Error('expected an EverdictError');
  }

  it('refuses a payload its schema rejects, naming the field', () => {
    const err = thrown(() => buildEnvelope({ ...base, type: 'task.runnable', payload: { taskId: 'not-a-uuid', reason: 'opened' } }, clock));
    expect(err.code).toBe('invalid_payload');
    expect(err.details['path']).toBe('/payload/taskId');
    expect(err.message).toContain('/payload/taskId');
    expect(err.retryable).toBe(false);
  });

  it('refuses a missing required field and an extra one', () => {
    const err = thrown(() => buildEnvelope({ ...base, type: 'task.cancel', payload: { taskId: CHILD_TASK, force: true } as never }, clock));
    expect(err.code).toBe('invalid_payload');
    expect(err.message).toContain('/payload/mode is required');
    expect(err.message).toContain('/payload/force is not allowed');
  });

  it('refuses an approved gate without a grant (conditional requirement)', () => {
    const { grantId: _grantId, ...noGrant } = SAMPLE_PAYLOADS['gate.decided'];
    const err = thrown(() => buildEnvelope({ ...base, type: 'gate.decided', payload: noGrant }, clock));
    expect(err.code).toBe('invalid_payload');
    expect(err.details['path']).toBe('/payload/grantId');
    // A rejection needs no grant.
    expect(buildEnvelope({ ...base, type: 'gate.decided', payload: { ...noGrant, outcome: 'rejected', reason: 'not now' } }, clock).payload.outcome).toBe('rejected');
  });

  it('refuses unknown types and versions', () => {
    expect(thrown(() => buildEnvelope({ ...base, type: 'task.exploded' as never, payload: {} as never }, clock)).code).toBe('unknown_type');
    const err = thrown(() => buildEnvelope({ ...base, type: 'task.runnable', version: 9 as never, payload: SAMPLE_PAYLOADS['task.runnable'] as never }, clock));
    expect(err.code).toBe('unknown_version');
    expect(err.details['supported']).toEqual([1]);
  });

  it('refuses an invalid envelope field and an inconsistent lineage', () => {
    const badCase = thrown(() => buildEnvelope({ ...base, caseId: 'nope', type: 'task.runnable', payload: SAMPLE_PAYLOADS['task.runnable'] }, clock));
    expect(badCase.code).toBe('invalid_envelope');
    expect(badCase.details['path']).toBe('/caseId');
    const badLineage = thrown(() =>
      buildEnvelope({ ...base, lineage: { rootCaseId: CASE_ID, parentTaskId: ROOT_TASK, ancestry: [] }, type: 'task.runnable', payload: SAMPLE_PAYLOADS['task.runnable'] }, clock),
    );
    expect(badLineage.code).toBe('invalid_envelope');
    expect(badLineage.details['path']).toBe('/lineage/ancestry');
  });

  it('refuses a payload with no canonical JSON form', () => {
    const err = thrown(() => buildEnvelope({ ...base, type: 'question.answered', payload: { ...SAMPLE_PAYLOADS['question.answered'], answer: '\ud800' } }, clock));
    expect(err.code).toBe('invalid_payload');
  });
});

describe('decodeMessage refusals, in pipeline order', () => {
  it('exports the reasons in pipeline order', () => {
    expect(DECODE_REASONS).toEqual(['oversized', 'malformed_json', 'invalid_envelope', 'unknown_type', 'unknown_version', 'invalid_payload', 'hash_mismatch']);
  });

  it('oversized: checked before parsing', () => {
    const bytes = encodeEnvelope(sampleEnvelope('task.runnable'));
    expect(decodeMessage(bytes, { maxBytes: bytes.byteLength }).ok).toBe(true);
    const r = expectFailure(decodeMessage(bytes, { maxBytes: bytes.byteLength - 1 }), 'oversized');
    expect(r.detail).toBe(`message is ${bytes.byteLength} bytes; the limit is ${bytes.byteLength - 1}`);
    // Garbage that is also too large is reported as oversized: nothing was parsed.
    expectFailure(decodeMessage(Buffer.from('{'.repeat(100)), { maxBytes: 10 }), 'oversized');
    expect(() => decodeMessage(bytes, { maxBytes: Number.NaN })).toThrow(RangeError);
  });

  it('malformed_json: bad JSON and bad UTF-8, without echoing the body', () => {
    const r = expectFailure(decodeMessage(Buffer.from('{"id": "x", "payload": SECRET-CONTENT'), LIMIT), 'malformed_json');
    expect(r.detail).toContain('not valid JSON');
    expect(r.detail).not.toContain('SECRET');
    const u = expectFailure(decodeMessage(Uint8Array.from([0x7b, 0xff, 0xfe, 0x7d]), LIMIT), 'malformed_json');
    expect(u.detail).toContain('not valid UTF-8');
  });

  it('invalid_envelope: names the field and salvages well-formed ids', () => {
    const missing = expectFailure(decodeMessage(tampered((e) => delete e['sender']), LIMIT), 'invalid_envelope');
    expect(missing.detail).toBe('/sender is required');
    expect(missing.messageId).toBe(BASE.id);
    expect(missing.type).toBe('task.runnable');
    expect(missing.version).toBe(1);
    expect(missing.caseId).toBe(CASE_ID);

    const badRoot = expectFailure(decodeMessage(tampered((e) => ((e['lineage'] as Record<string, unknown>)['rootCaseId'] = 'SECRET')), LIMIT), 'invalid_envelope');
    expect(badRoot.detail).toContain('/lineage/rootCaseId must match pattern');
    expect(badRoot.detail).not.toContain('SECRET');

    const extra = expectFailure(decodeMessage(tampered((e) => (e['priority'] = 1)), LIMIT), 'invalid_envelope');
    expect(extra.detail).toContain('/priority is not allowed');

    const trust = expectFailure(decodeMessage(tampered((e) => (e['trust'] = 'root')), LIMIT), 'invalid_envelope');
    expect(trust.detail).toContain('/trust must be one of ["platform","agent","external"]');

    const notObject = expectFailure(decodeMessage(Buffer.from('[1,2]'), LIMIT), 'invalid_envelope');
    expect(notObject.detail).toContain('/ must be object');
    expect(notObject.messageId).toBeUndefined();

    const badId = expectFailure(decodeMessage(tampered((e) => (e['id'] = 'SECRET-ID')), LIMIT), 'invalid_envelope');
    expect(badId.messageId).toBeUndefined();
    expect(badId.detail).toContain('/id must match pattern');

    const lineage = expectFailure(decodeMessage(tampered((e) => (e['lineage'] = { rootCaseId: CASE_ID, parentTaskId: null, ancestry: [ROOT_TASK] })), LIMIT), 'invalid_envelope');
    expect(lineage.detail).toContain('/lineage/parentTaskId');
  });

  it('unknown_type: rejected without looking at the payload', () => {
    const r = expectFailure(decodeMessage(tampered((e) => ((e['type'] = 'task.exploded'), (e['payload'] = { anything: true }))), LIMIT), 'unknown_type');
    expect(r.type).toBe('task.exploded');
    expect(r.detail).toContain('task.exploded');
    expect(r.messageId).toBe(BASE.id);
    // A prototype key is not a registered type.
    expectFailure(decodeMessage(tampered((e) => (e['type'] = 'constructor.prototype')), LIMIT), 'unknown_type');
  });

  it('unknown_version: rejected without guessing the payload', () => {
    const r = expectFailure(decodeMessage(tampered((e) => (e['version'] = 2)), LIMIT), 'unknown_version');
    expect(r.version).toBe(2);
    expect(r.detail).toBe('/version 2 is not supported for task.runnable (supported: 1)');
  });

  it('invalid_payload: names the payload field, never its value', () => {
    const r = expectFailure(decodeMessage(tampered((e) => ((e['payload'] as Record<string, unknown>)['taskId'] = 'SECRET-TASK')), LIMIT), 'invalid_payload');
    expect(r.detail).toContain('/payload/taskId must match pattern');
    expect(r.detail).not.toContain('SECRET');
    expect(r.type).toBe('task.runnable');

    const reason = expectFailure(decodeMessage(tampered((e) => ((e['payload'] as Record<string, unknown>)['reason'] = 'because')), LIMIT), 'invalid_payload');
    expect(reason.detail).toContain('/payload/reason must be one of');
    expect(reason.detail).not.toContain('because');

    const missing = expectFailure(decodeMessage(tampered((e) => delete (e['payload'] as Record<string, unknown>)['reason']), LIMIT), 'invalid_payload');
    expect(missing.detail).toBe('/payload/reason is required');

    const oddKey = expectFailure(decodeMessage(tampered((e) => ((e['payload'] as Record<string, unknown>)['SECRET CONTENT as a key!'] = 1)), LIMIT), 'invalid_payload');
    expect(oddKey.detail).toBe('/payload/<unprintable property> is not allowed');
  });

  it('hash_mismatch: a payload changed after stamping', () => {
    const r = expectFailure(decodeMessage(tampered((e) => ((e['payload'] as Record<string, unknown>)['reason'] = 'retry'), false), LIMIT), 'hash_mismatch');
    expect(r.detail).toContain('/payloadHash');
    expect(r.messageId).toBe(BASE.id);
    expect(r.caseId).toBe(CASE_ID);
  });

  it('a reordered payload keeps its hash (canonical form)', () => {
    const bytes = tampered((e) => {
      const p = e['payload'] as Record<string, unknown>;
      e['payload'] = Object.fromEntries(Object.entries(p).reverse());
    }, false);
    expect(decodeMessage(bytes, LIMIT).ok).toBe(true);
  });

  it('checkEnvelope runs the same pipeline on an in-process value', () => {
    const env = sampleEnvelope('task.finished');
    expect(checkEnvelope(structuredClone(env)).ok).toBe(true);
    expectFailure(checkEnvelope({ ...env, payload: { ...env.payload, summary: 'changed' } }), 'hash_mismatch');
  });
});
