/** K1: authorizeToolInvocation is the only scope gate and the loop uses its answer verbatim. */
import { describe, expect, it } from 'vitest';
import { authorizeToolInvocation, type ToolScope } from '@everdict/contracts';
import { answer, call, harness, probeTool, toolResults } from './harness.js';

describe('K1 scope gate in the loop', () => {
  it.each<[string, 'read' | 'write', ToolScope, boolean]>([
    // Regression: listing writes must never silently narrow a run to writes-only.
    ['read listed in reads while writes is non-empty', 'read', { reads: ['crm_get'], writes: ['crm_update'], forbidden: [] }, true],
    ['read listed in reads while writes is empty', 'read', { reads: ['crm_get'], writes: [], forbidden: [] }, true],
    ['read under executor posture', 'read', { reads: 'all', writes: [], forbidden: [] }, true],
    ['read not listed', 'read', { reads: ['other'], writes: ['crm_get'], forbidden: [] }, false],
    ['write listed', 'write', { reads: [], writes: ['crm_get'], forbidden: [] }, true],
    ['write under executor posture only', 'write', { reads: 'all', writes: [], forbidden: [] }, false],
    ['forbidden read under executor posture', 'read', { reads: 'all', writes: [], forbidden: ['crm_get'] }, false],
    ['forbidden write that is also listed', 'write', { reads: [], writes: ['crm_get'], forbidden: ['crm_*'] }, false],
  ])('%s', async (_case, access, scope, runs) => {
    const tool = probeTool('crm_get', { access });
    const h = harness([call(['crm_get', { id: 7 }]), answer('done')], [tool], { scope });
    const r = await h.run();
    const [result] = toolResults(r.events);
    const verdict = authorizeToolInvocation(tool.descriptor, { scope });
    expect(tool.calls.length).toBe(runs ? 1 : 0);
    // Verbatim: the refusal in the event is exactly the contract's answer.
    expect(result?.refusal ?? null).toBe(verdict.allowed ? null : verdict.refusal);
    expect(result?.outcome).toBe(runs ? 'ok' : 'refused');
    // A refused call never reaches the permission hook.
    if (!runs) expect(h.permission.requests).toEqual([]);
    expect(r.settlement.kind).toBe('completed');
  });
});
