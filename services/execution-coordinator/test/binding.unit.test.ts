/** checkAuthority's binding recheck (seed 004 §5): template hash, packet version, shape version. */
import { describe, expect, it } from 'vitest';
import { sealPacket } from '@everdict/contracts';
import type { EffectPacket } from '@everdict/contracts';
import type { DecisionRow, GateRow, GrantRow } from '@everdict/store';
import { checkAuthority } from '../src/index.js';
import type { AuthorityFacts } from '../src/index.js';

const CASE = '01900000-0000-7000-8000-000000000001';
const HASH = `sha256:${'a'.repeat(64)}`;
const base = (o: Partial<EffectPacket> = {}): EffectPacket =>
  sealPacket({
    packetVersion: 1,
    caseId: CASE,
    planStepId: 'step-1',
    planRevision: 1,
    shapeVersion: '1',
    operation: { connector: 'billing', name: 'accounts.credit', templateHash: HASH },
    effectClass: 'payment',
    target: { connector: 'billing', system: 'billing', environment: 'test' },
    params: { accountId: 'a', amountCents: 1 },
    expectedCounts: {},
    preconditions: [],
    assertions: [],
    revert: { kind: 'manual', description: 'by hand' },
    impactKeys: ['billing:test:a'],
    ...o,
  });

function facts(packet: EffectPacket, binding: AuthorityFacts['binding']): AuthorityFacts {
  const digest = packet.digest!;
  const grant = { id: 'g', case_id: CASE, gate_id: 'gate', task_id: 't', packet_digest: digest, state: 'issued', reserved_call_id: null, expires_at: new Date(1), revoked_at: null, revoke_reason: null, expired: false } as unknown as GrantRow;
  const gate = { id: 'gate', case_id: CASE, packet_digest: digest, state: 'approved', required_decisions: [{ decision: 'HW-payment', role: 'finance' }] } as unknown as GateRow;
  const decision = { decision: 'HW-payment', verdict: 'approve', digest } as DecisionRow;
  return { grant, gate, decisions: [decision], packet: { ok: true, packet }, task: { state: 'parked', cancel_requested: null }, caseStop: null, ownCallId: null, connectorKnown: true, binding };
}
const reason = (p: EffectPacket, b: AuthorityFacts['binding']) => checkAuthority(facts(p, b))?.reason;

describe('binding rechecked at dispatch', () => {
  const current = { templateHash: HASH, shapeVersion: '1' };
  it('admits the template and shape it was approved for', () => {
    expect(reason(base(), current)).toBeUndefined();
  });
  it('refuses a changed template, an unpinned packet, another shape version', () => {
    expect(reason(base(), { ...current, templateHash: `sha256:${'b'.repeat(64)}` })).toBe('template_changed');
    expect(reason(base({ operation: { connector: 'billing', name: 'accounts.credit' } }), current)).toBe('template_unbound');
    expect(reason(base({ shapeVersion: '2' }), current)).toBe('shape_changed');
  });
  it('leaves an operation the connector does not register to its admission', () => {
    expect(reason(base({ operation: { connector: 'billing', name: 'accounts.gone' } }), undefined)).toBeUndefined();
  });
});
