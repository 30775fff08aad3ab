/** K3: the permission hook fires for writes and consent-requiring reads, with the REAL access kind. */
import { describe, expect, it } from 'vitest';
import type { ToolDescriptor } from '@everdict/contracts';
import { answer, call, harness, probeTool, toolResults } from './harness.js';

type Case = [string, Partial<ToolDescriptor>, null | { isReadOnly: boolean; reason: 'write' | 'consent_read' }];

describe('K3 permission hook', () => {
  it.each<Case>([
    ['plain read stays ungated (the senses)', { access: 'read' }, null],
    ['internal-egress read stays ungated', { access: 'read', effects: { dataAccess: { egress: 'internal' } } }, null],
    ['external-egress read asks, and says it is a read', { access: 'read', effects: { dataAccess: { egress: 'external' } } }, { isReadOnly: true, reason: 'consent_read' }],
    ['write asks', { access: 'write' }, { isReadOnly: false, reason: 'write' }],
    // Regression: access comes from what the handler does. A shell in a live container guarded
    // by a `runs:read` RBAC action and named like a read is still a write.
    ['mutating handler named like a read is still gated', { access: 'write', description: 'exec_in_run; RBAC action runs:read' }, { isReadOnly: false, reason: 'write' }],
  ])('%s', async (_c, over, expected) => {
    const name = 'get_run_status';
    const tool = probeTool(name, over);
    const h = harness([call([name, { q: 1 }]), answer('done')], [tool], { scope: { reads: 'all', writes: [name], forbidden: [] } });
    await h.run();
    if (expected === null) {
      expect(h.permission.requests).toEqual([]);
    } else {
      expect(h.permission.requests).toHaveLength(1);
      expect(h.permission.requests[0]).toMatchObject({ tool: name, arguments: { q: 1 }, ...expected, effects: over.effects ?? null });
    }
    expect(tool.calls).toHaveLength(1);
  });

  it.each([
    ['the hook denies', { permission: () => ({ decision: 'deny' as const, reason: 'operator said no' }) }],
    ['no hook is configured (fail closed)', { noPermissionHook: true }],
  ])('a write is withheld when %s', async (_c, opts) => {
    const tool = probeTool('crm_update', { access: 'write' });
    const h = harness([call(['crm_update', {}]), answer('done')], [tool], { scope: { reads: 'all', writes: ['crm_update'], forbidden: [] }, ...opts });
    const r = await h.run();
    expect(tool.calls).toEqual([]);
    expect(toolResults(r.events)[0]).toMatchObject({ outcome: 'refused', refusal: 'permission_denied', isError: true });
  });
});
