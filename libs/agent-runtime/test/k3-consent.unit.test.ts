/** K3: the permission hook fires for writes and consent-requiring reads, with the REAL access kind. */
import { describe, expect, it } from 'vitest';
import type { ToolDescriptor } from '@everdict/contracts';
import { resumeRun, runToSettlement } from '../src/index.js';
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

  const egress = { access: 'read' as const, effects: { dataAccess: { egress: 'external' as const } } };

  it('a consent the hook refuses is answered consent_denied; nothing runs', async () => {
    const tool = probeTool('search', egress);
    const h = harness([call(['search', {}]), answer('done')], [tool], { permission: () => ({ decision: 'deny', refusal: 'consent_denied', reason: 'rejected by alice' }) });
    const r = await h.run();
    expect(tool.calls).toEqual([]);
    expect(toolResults(r.events)[0]).toMatchObject({ outcome: 'refused', refusal: 'consent_denied', isError: true });
  });

  it('`ask` suspends the run on a consent park with the call intent open; resumed, the same call id is asked again and runs once', async () => {
    const tool = probeTool('search', egress);
    let decision: 'ask' | 'allow' = 'ask';
    const h = harness([call(['search', { q: 1 }]), answer('done')], [tool], { permission: () => ({ decision }) });
    const first = await h.run();
    expect(first.settlement).toMatchObject({ kind: 'suspended', parkReason: 'consent', cause: 'consent' });
    expect(tool.calls).toEqual([]);
    const open = h.journal.all().filter((c) => c.kind === 'tool');
    expect(open.map((c) => c.status)).toEqual(['intent']);
    // The turn was not consumed: the same turn runs again and the hook is asked under the same call id.
    expect(first.state.turn).toBe(0);
    decision = 'allow';
    const second = await runToSettlement(h.deps, h.ctx, resumeRun(first.state));
    expect(second.settlement).toMatchObject({ kind: 'completed', result: 'done' });
    expect(tool.calls).toHaveLength(1);
    expect(h.permission.requests.map((q) => q.callId)).toEqual([open[0]!.callId, open[0]!.callId]);
  });

  it('a write is never parked for consent: `ask` on a write is refused', async () => {
    const tool = probeTool('crm_update', { access: 'write' });
    const h = harness([call(['crm_update', {}]), answer('done')], [tool], { scope: { reads: 'all', writes: ['crm_update'], forbidden: [] }, permission: () => ({ decision: 'ask' }) });
    const r = await h.run();
    expect(r.settlement).toMatchObject({ kind: 'completed' });
    expect(tool.calls).toEqual([]);
    expect(toolResults(r.events)[0]).toMatchObject({ outcome: 'refused', refusal: 'permission_denied' });
  });
});
