/** K5: a halt owes a handoff; budget exhaustion and an armed wait settle SUSPENDED, never completed. */
import { describe, expect, it } from 'vitest';
import type { HandoffPort } from '@everdict/agent-runtime';
import { answer, call, harness, probeTool } from './harness.js';

const published: HandoffPort = { publish: async () => 'published' };
const failing: HandoffPort = {
  publish: async () => {
    throw new Error('paper store down');
  },
};

describe('K5 suspension and handoff', () => {
  it.each([
    ['published', published, 'published'],
    ['failed (the port threw)', failing, 'failed'],
    ['absent (no port)', undefined, 'absent'],
  ])('budget exhaustion suspends with handoff %s', async (_c, handoff, fate) => {
    const seen: unknown[] = [];
    const port = handoff && { publish: async (h: Parameters<HandoffPort['publish']>[0]) => (seen.push(h), handoff.publish(h)) };
    // The model would answer on turn 2, but the budget allows one turn: never `completed`.
    const h = harness([call(['read_a', {}]), answer('done')], [probeTool('read_a')], { budget: { maxTurns: 1 }, ...(port ? { handoff: port } : {}) });
    const r = await h.run();
    expect(r.settlement).toEqual({ kind: 'suspended', parkReason: 'budget', cause: 'budget_exhausted', budgetDimension: 'turns', handoff: fate });
    expect(r.events.some((e) => e.type === 'budget_exhausted')).toBe(true);
    if (port) {
      // The handoff carries the resumable state: no settlement, the next turn to run.
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({ parkReason: 'budget', state: { settlement: null, turn: 1 } });
    }
  });

  it.each([
    ['tool calls', { maxToolCalls: 1 }, 'toolCalls'],
    ['measured tokens', { maxTokens: 10 }, 'tokens'],
  ])('exhausting %s suspends too', async (_c, budget, dimension) => {
    const step = { toolCalls: [{ name: 'read_a', arguments: {} }], usage: { inputTokens: 8, outputTokens: 4 } };
    const h = harness([step, step, answer('done')], [probeTool('read_a')], { budget });
    const r = await h.run();
    expect(r.settlement).toMatchObject({ kind: 'suspended', parkReason: 'budget', budgetDimension: dimension });
  });

  it.each([
    ['question', 'question'],
    ['children', 'children'],
  ] as const)('an armed wait for %s suspends (parked %s) with a handoff', async (waitFor, parkReason) => {
    const question = { gap: 'which account', checked: 'crm', dependsOn: 'step 2', alternatives: ['a', 'b'], decisionNeeded: 'pick one' };
    const args = waitFor === 'question' ? { for: waitFor, reason: 'need input', question } : { for: waitFor, reason: 'children running' };
    const h = harness([call(['wait', args]), answer('never reached')], [], { handoff: published });
    const r = await h.run();
    expect(r.settlement).toEqual({ kind: 'suspended', parkReason, cause: 'wait', handoff: 'published' });
    expect(r.state.wait).toMatchObject({ for: waitFor });
  });
});
