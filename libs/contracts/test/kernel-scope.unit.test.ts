import { describe, expect, it } from 'vitest';
import { authorizeToolInvocation, intrinsic, validateToolScope, type ToolDescriptor, type ToolScope } from '@everdict/contracts';

const tool = (name: string, access: 'read' | 'write', origin: ToolDescriptor['origin'] = 'first_party'): ToolDescriptor => ({
  name,
  description: '',
  inputSchema: { type: 'object' },
  access,
  origin,
  transport: 'in_process',
  argumentValidation: 'kernel',
});
const todo = intrinsic(tool('todo', 'read', 'kernel'));
const scope = (s: Partial<ToolScope>): { scope: ToolScope } => ({ scope: { reads: [], writes: [], forbidden: [], ...s } });

describe('authorizeToolInvocation (K1)', () => {
  it.each([
    // [case, tool, scope, expected]
    ['listed read', tool('crm_get', 'read'), scope({ reads: ['crm_get'] }), { allowed: true, basis: 'reads' }],
    ['executor posture admits any read', tool('crm_get', 'read'), scope({ reads: 'all' }), { allowed: true, basis: 'executor_posture' }],
    ['unlisted read', tool('crm_get', 'read'), scope({ reads: ['other'] }), { allowed: false, refusal: 'read_out_of_scope' }],
    // Regression: a read is never checked against writes, so listing writes cannot narrow reads to nothing.
    ['read listed in reads, writes empty', tool('crm_get', 'read'), scope({ reads: ['crm_get'], writes: [] }), { allowed: true, basis: 'reads' }],
    ['read listed only in writes is not a read grant', tool('crm_get', 'read'), scope({ writes: ['crm_get'] }), { allowed: false, refusal: 'read_out_of_scope' }],
    ['listed write', tool('crm_update', 'write'), scope({ writes: ['crm_update'] }), { allowed: true, basis: 'writes' }],
    ['executor posture is not a write grant', tool('crm_update', 'write'), scope({ reads: 'all' }), { allowed: false, refusal: 'write_out_of_scope' }],
    ['write listed only in reads', tool('crm_update', 'write'), scope({ reads: ['crm_update'] }), { allowed: false, refusal: 'write_out_of_scope' }],
    ['prefix pattern', tool('crm__update', 'write'), scope({ writes: ['crm__*'] }), { allowed: true, basis: 'writes' }],
    ['forbidden beats reads', tool('crm_get', 'read'), scope({ reads: 'all', forbidden: ['crm_get'] }), { allowed: false, refusal: 'forbidden' }],
    ['forbidden beats writes', tool('crm_update', 'write'), scope({ writes: ['crm_update'], forbidden: ['crm_*'] }), { allowed: false, refusal: 'forbidden' }],
    ['intrinsic is exempt from reads/writes', todo, scope({}), { allowed: true, basis: 'intrinsic' }],
    ['forbidden refuses intrinsic too', todo, scope({ forbidden: ['todo'] }), { allowed: false, refusal: 'forbidden' }],
    ['a self-set intrinsic flag on a workspace tool gains nothing', { ...tool('todo_like', 'write', 'workspace'), intrinsic: true as const }, scope({}), { allowed: false, refusal: 'write_out_of_scope' }],
  ])('%s', (_case, t, env, expected) => {
    expect(authorizeToolInvocation(t, env)).toEqual(expected);
  });
});

describe('validateToolScope', () => {
  it('accepts "all" and lists', () => {
    expect(validateToolScope({ reads: 'all', writes: ['a'], forbidden: [] })).toEqual({ reads: 'all', writes: ['a'], forbidden: [] });
  });
  it.each([
    [{ reads: 'some', writes: [], forbidden: [] }, 'scope.reads'],
    [{ reads: [], writes: 'x', forbidden: [] }, 'scope.writes'],
    [{ reads: [], writes: [] }, 'scope.forbidden'],
  ])('names the bad field %#', (value, field) => {
    expect(() => validateToolScope(value)).toThrow(expect.objectContaining({ code: 'invalid_scope', details: { field } }));
  });
});
