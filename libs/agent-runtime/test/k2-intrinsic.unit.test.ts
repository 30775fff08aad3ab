/** K2: intrinsic cognition is exempt from reads/writes, refusable by forbidden, never a workspace capability. */
import { describe, expect, it } from 'vitest';
import { isIntrinsic, INTRINSIC_TOOL_NAMES } from '@everdict/contracts';
import { kernelRegistry } from '@everdict/agent-runtime';
import { answer, call, harness, probeTool, toolResults } from './harness.js';

const EMPTY = { reads: [], writes: [], forbidden: [] };
const items = [{ id: 't1', text: 'check the ticket', status: 'pending' }];

describe('K2 intrinsic cognition tools', () => {
  it.each([
    ['runs with an empty scope', EMPTY, 'ok', items],
    ['runs under executor posture', { ...EMPTY, reads: 'all' as const }, 'ok', items],
    ['is refused when forbidden', { ...EMPTY, forbidden: ['todo'] }, 'refused', []],
    ['is refused by a forbidden pattern', { ...EMPTY, forbidden: ['to*'] }, 'refused', []],
  ])('todo %s', async (_c, scope, outcome, todos) => {
    const h = harness([call(['todo', { items }]), answer('ok')], [], { scope });
    const r = await h.run();
    expect(toolResults(r.events)[0]?.outcome).toBe(outcome);
    expect(r.state.todos).toEqual(todos);
  });

  it('the registry merge marks exactly the kernel cognition tools', () => {
    const reg = kernelRegistry([probeTool('crm_get'), probeTool('ws_tool', { origin: 'workspace' })]);
    const marked = reg.descriptors.filter(isIntrinsic).map((d) => d.name);
    expect(marked.sort()).toEqual([...INTRINSIC_TOOL_NAMES].sort());
    expect(isIntrinsic(reg.descriptor('crm_get')!)).toBe(false);
    expect(isIntrinsic(reg.descriptor('ws_tool')!)).toBe(false);
  });

  it.each([
    ['claims the kernel origin', probeTool('helper', { origin: 'kernel' }), 'not_intrinsic'],
    ['sets the intrinsic flag itself', probeTool('helper', { origin: 'workspace', intrinsic: true }), 'invalid_tool_descriptor'],
    ['takes an intrinsic name', probeTool('spawn', { origin: 'workspace' }), 'tool_name_taken'],
  ])('a workspace capability is never intrinsic: refused when it %s', (_c, tool, code) => {
    expect(() => kernelRegistry([tool])).toThrow(expect.objectContaining({ code }));
  });
});
