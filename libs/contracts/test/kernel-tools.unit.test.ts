import { describe, expect, it } from 'vitest';
import { effectsRequireConsent, intrinsic, isIntrinsic, modeAdmitsInvocation, permissionRequired, validateToolDescriptor, type ToolDescriptor } from '@everdict/contracts';

const d = (over: Partial<ToolDescriptor> = {}): ToolDescriptor => ({
  name: 'tool_a',
  description: '',
  inputSchema: { type: 'object' },
  access: 'read',
  origin: 'first_party',
  transport: 'in_process',
  argumentValidation: 'kernel',
  ...over,
});

describe('intrinsic wrapper (K2)', () => {
  it('marks kernel cognition tools', () => {
    const t = intrinsic(d({ name: 'todo', origin: 'kernel' }));
    expect(isIntrinsic(t)).toBe(true);
  });
  it.each(['first_party', 'workspace'] as const)('never marks a %s tool', (origin) => {
    expect(() => intrinsic(d({ origin }))).toThrow(expect.objectContaining({ code: 'not_intrinsic' }));
  });
  it('a descriptor cannot declare itself intrinsic', () => {
    expect(() => validateToolDescriptor(d({ origin: 'workspace', intrinsic: true }))).toThrow(expect.objectContaining({ details: expect.objectContaining({ field: 'intrinsic' }) }));
    expect(isIntrinsic({ origin: 'workspace', intrinsic: true })).toBe(false);
  });
});

describe('permissionRequired / effectsRequireConsent (K3)', () => {
  it.each([
    ['plain read (the senses)', d(), { required: false }],
    ['internal-egress read', d({ effects: { dataAccess: { egress: 'internal' } } }), { required: false }],
    ['external-egress read is exfiltration-shaped', d({ effects: { dataAccess: { egress: 'external' } } }), { required: true, reason: 'consent_read' }],
    ['write', d({ access: 'write' }), { required: true, reason: 'write' }],
    // Access is declared: a mutating handler named like a read is a write.
    ['mutating tool named get_status', d({ name: 'get_status', access: 'write' }), { required: true, reason: 'write' }],
  ])('%s', (_c, t, expected) => {
    expect(permissionRequired(t)).toEqual(expected);
  });
  it('only external egress needs consent', () => {
    expect(effectsRequireConsent(undefined)).toBe(false);
    expect(effectsRequireConsent({ dataAccess: { egress: 'none' } })).toBe(false);
    expect(effectsRequireConsent({ dataAccess: { egress: 'external' } })).toBe(true);
  });
});

describe('validateToolDescriptor', () => {
  it.each([
    [{ name: 'has.dot' }, 'name'],
    [{ name: '' }, 'name'],
    [{ access: 'readish' as never }, 'access'],
    [{ origin: 'somewhere' as never }, 'origin'],
    [{ transport: 'pigeon' as never }, 'transport'],
    [{ inputSchema: [] as never }, 'inputSchema'],
    [{ effects: { dataAccess: { egress: 'moon' as never } } }, 'effects.dataAccess.egress'],
    [{ access: 'write', origin: 'workspace', outcomeAtomic: true } as Partial<ToolDescriptor>, 'outcomeAtomic'],
    [{ access: 'write', transport: 'remote', outcomeAtomic: true } as Partial<ToolDescriptor>, 'outcomeAtomic'],
  ])('names the bad field %#', (over, field) => {
    expect(() => validateToolDescriptor(d(over))).toThrow(expect.objectContaining({ code: 'invalid_tool_descriptor', details: expect.objectContaining({ field }) }));
  });
});

describe('outcomeAtomic', () => {
  it('a first-party in-process write may declare it', () => {
    expect(validateToolDescriptor(d({ access: 'write', outcomeAtomic: true })).outcomeAtomic).toBe(true);
  });
});

describe('modeAdmitsInvocation (K7)', () => {
  const shadow = { kind: 'shadow' as const, executableReads: ['crm_get', 'ws_get', 'crm_update'] };
  it.each([
    ['absent mode is live', d({ access: 'write' }), undefined, true],
    ['live admits writes', d({ access: 'write' }), { kind: 'live' as const }, true],
    ['attested first-party read', d({ name: 'crm_get' }), shadow, true],
    ['unattested first-party read', d({ name: 'crm_other' }), shadow, false],
    ['a workspace read is never executable, even if listed', d({ name: 'ws_get', origin: 'workspace' }), shadow, false],
    ['a write is never executable, even if listed', d({ name: 'crm_update', access: 'write' }), shadow, false],
    ['intrinsic cognition runs', intrinsic(d({ name: 'todo', origin: 'kernel' })), shadow, true],
  ])('%s', (_c, t, mode, expected) => {
    expect(modeAdmitsInvocation(t, mode)).toBe(expected);
  });
});
