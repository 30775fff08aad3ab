import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { sealPacket } from '@everdict/contracts';
import type { EffectPacket } from '@everdict/contracts';
import { EFFECT_DISPATCH_STATES } from '@everdict/store';
import type { DecisionRow, GateRow, GrantRow } from '@everdict/store';
import { crash as crashKit } from '@everdict/service-kit';
import { COORDINATOR_CRASH_POINTS, backoffDelay, checkAuthority } from '../src/index.js';

const parseCrashSpec = (spec: string) => crashKit.parseCrashSpec(COORDINATOR_CRASH_POINTS, spec);
const crashPointsFromEnv = (env: Record<string, string | undefined>, kill?: () => void) => crashKit.crashPointsFromEnv(COORDINATOR_CRASH_POINTS, env, kill);
import type { AuthorityFacts } from '../src/index.js';

const CASE = '01900000-0000-7000-8000-000000000001';
const packet: EffectPacket = sealPacket({
  packetVersion: 1,
  caseId: CASE,
  planStepId: 'step-1',
  planRevision: 1,
  shapeVersion: 'v1',
  operation: { connector: 'billing', name: 'accounts.credit' },
  effectClass: 'payment',
  target: { connector: 'billing', system: 'billing', environment: 'test' },
  params: { accountId: 'a', amountCents: 1 },
  expectedCounts: {},
  preconditions: [],
  assertions: [],
  revert: { kind: 'manual', description: 'by hand' },
  impactKeys: ['billing:test:a'],
});
const digest = packet.digest!;

const grant: GrantRow = {
  id: 'g', case_id: CASE, gate_id: 'gate', task_id: 't', packet_digest: digest, state: 'issued', reserved_call_id: null,
  issued_at: new Date(0), expires_at: new Date(1), revoked_at: null, consumed_at: null, revoke_reason: null, expired: false,
};
const gate = {
  id: 'gate', case_id: CASE, task_id: 't', packet_digest: digest, state: 'approved', required_decisions: [{ decision: 'HW-payment', role: 'finance' }],
} as unknown as GateRow;
const decision = { decision: 'HW-payment', verdict: 'approve', digest } as DecisionRow;

const facts = (over: Partial<AuthorityFacts> = {}): AuthorityFacts => ({
  grant, gate, decisions: [decision], packet: { ok: true, packet }, task: { state: 'parked', cancel_requested: null }, caseStop: null, ownCallId: null, connectorKnown: true, binding: undefined,
  ...over,
});
const reason = (f: AuthorityFacts) => checkAuthority(f)?.reason;

describe('checkAuthority', () => {
  it('admits a current, approved, unexpired grant for the packet it was given on', () => {
    expect(checkAuthority(facts())).toBeUndefined();
    expect(reason(facts({ grant: { ...grant, state: 'reserved', reserved_call_id: 'c1' }, ownCallId: 'c1' }))).toBeUndefined();
  });
  it('refuses a grant that is missing, used, expired or revoked', () => {
    expect(reason(facts({ grant: undefined }))).toBe('grant_missing');
    expect(reason(facts({ grant: { ...grant, state: 'reserved', reserved_call_id: 'other' } }))).toBe('grant_used');
    expect(reason(facts({ grant: { ...grant, state: 'consumed', reserved_call_id: 'other' } }))).toBe('grant_used');
    expect(reason(facts({ grant: { ...grant, state: 'reserved', reserved_call_id: 'other' }, ownCallId: 'mine' }))).toBe('grant_used');
    expect(reason(facts({ grant: { ...grant, expired: true } }))).toBe('grant_expired');
    expect(reason(facts({ grant: { ...grant, state: 'expired' } }))).toBe('grant_expired');
    expect(reason(facts({ grant: { ...grant, revoked_at: new Date(0) } }))).toBe('grant_revoked');
    expect(reason(facts({ grant: { ...grant, state: 'reserved', reserved_call_id: 'c1', revoked_at: new Date(0) }, ownCallId: 'c1' }))).toBe('grant_revoked');
  });
  it('refuses when the gate, decisions or packet do not carry the granted digest', () => {
    expect(reason(facts({ gate: { ...gate, state: 'revoked' } }))).toBe('gate_not_approved');
    expect(reason(facts({ gate: { ...gate, packet_digest: 'sha256:' + 'f'.repeat(64) } }))).toBe('digest_mismatch');
    expect(reason(facts({ decisions: [] }))).toBe('decisions_missing');
    expect(reason(facts({ decisions: [{ ...decision, digest: 'sha256:' + 'f'.repeat(64) }] }))).toBe('decisions_missing');
    const altered = { ...packet, params: { accountId: 'a', amountCents: 2 } };
    expect(reason(facts({ packet: { ok: true, packet: altered } }))).toBe('digest_mismatch');
    expect(reason(facts({ packet: { ok: false, problem: 'missing' } }))).toBe('packet_unusable');
  });
  it('refuses for a cancelled or finished task, a hard-stopped case, an unknown connector', () => {
    expect(reason(facts({ task: undefined }))).toBe('task_missing');
    expect(reason(facts({ task: { state: 'cancelled', cancel_requested: null } }))).toBe('task_cancelled');
    expect(reason(facts({ task: { state: 'running', cancel_requested: 'hard' } }))).toBe('task_cancelled');
    expect(reason(facts({ task: { state: 'done', cancel_requested: null } }))).toBe('task_finished');
    expect(reason(facts({ caseStop: 'hard' }))).toBe('hard_stop');
    expect(reason(facts({ caseStop: 'soft' }))).toBeUndefined();
    expect(reason(facts({ connectorKnown: false }))).toBe('connector_unknown');
  });
});

describe('backoff, crash points, dispatch states', () => {
  it('doubles and caps', () => {
    expect([0, 1, 2, 10].map((n) => backoffDelay(n, { initialMs: 100, maxMs: 1000 }))).toEqual([100, 200, 400, 1000]);
  });
  it('parses crash specs and fires on the n-th arrival only', () => {
    expect([...parseCrashSpec('before_execute:2, after_execute')]).toEqual([['before_execute', 2], ['after_execute', 1]]);
    expect(() => parseCrashSpec('nowhere:1')).toThrow(/EVERDICT_CRASHPOINT/);
    expect(() => parseCrashSpec('before_execute:0')).toThrow(/n >= 1/);
    let kills = 0;
    const crash = crashPointsFromEnv({ EVERDICT_CRASHPOINT: 'after_execute:2' }, () => kills++);
    crash.reach('before_execute');
    crash.reach('after_execute');
    expect(kills).toBe(0);
    crash.reach('after_execute');
    crash.reach('after_execute');
    expect(kills).toBe(1);
  });
  it('names exactly the states the migration allows', () => {
    const sql = readFileSync(fileURLToPath(new URL('../../../libs/store/migrations/0003_effects.sql', import.meta.url)), 'utf8');
    const list = /state\s+text NOT NULL DEFAULT 'pending'\s+CHECK \(state IN \(([^)]*)\)\)/.exec(sql)?.[1];
    expect(list?.split(',').map((s) => s.trim().replace(/'/g, ''))).toEqual([...EFFECT_DISPATCH_STATES]);
  });
});
