import { describe, expect, it } from 'vitest';
import { budgetExhausted, validateRunBudget, ZERO_USAGE } from '@everdict/contracts';

describe('budgetExhausted (K5)', () => {
  it.each([
    ['no limits', {}, ZERO_USAGE, { exhausted: false }],
    ['under the turn limit', { maxTurns: 3 }, { ...ZERO_USAGE, turns: 2 }, { exhausted: false }],
    ['at the turn limit', { maxTurns: 3 }, { ...ZERO_USAGE, turns: 3 }, { exhausted: true, dimension: 'turns', limit: 3, used: 3 }],
    ['tool calls', { maxToolCalls: 1 }, { ...ZERO_USAGE, toolCalls: 1 }, { exhausted: true, dimension: 'toolCalls', limit: 1, used: 1 }],
    ['measured tokens', { maxTokens: 100 }, { ...ZERO_USAGE, measuredTokens: 120 }, { exhausted: true, dimension: 'tokens', limit: 100, used: 120 }],
    // Unmeasured calls are unknown, never counted as zero nor as a guess.
    ['unmeasured usage proves nothing', { maxTokens: 100 }, { ...ZERO_USAGE, unmeasuredModelCalls: 50 }, { exhausted: false }],
    ['active minutes', { maxActiveMinutes: 1 }, { ...ZERO_USAGE, activeMs: 60_000 }, { exhausted: true, dimension: 'activeMinutes', limit: 1, used: 1 }],
  ])('%s', (_c, budget, usage, expected) => {
    expect(budgetExhausted(budget, usage)).toEqual(expected);
  });
  it('names the bad budget field', () => {
    expect(() => validateRunBudget({ maxTurns: -1 })).toThrow(expect.objectContaining({ code: 'invalid_budget', details: { field: 'budget.maxTurns' } }));
  });
});
