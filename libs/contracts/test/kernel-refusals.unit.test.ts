import { describe, expect, it } from 'vitest';
import { callStatusForOutcome, isKernelRefusal, KERNEL_REFUSAL_CODES, KERNEL_REFUSALS, kernelRefusalCode, outcomeIsError, refusalText, TOOL_OUTCOMES } from '@everdict/contracts';

describe('kernel refusal constants (K8)', () => {
  it.each(KERNEL_REFUSAL_CODES)('%s text is recognised, with or without detail', (code) => {
    expect(isKernelRefusal(KERNEL_REFUSALS[code])).toBe(true);
    expect(kernelRefusalCode(refusalText(code, '(tool x)'))).toBe(code);
  });
  it.each(['Error: something broke', 'error', 'Refused', '', 'kernel refusal [forbidden]', null, 42])('does not guess from %j', (text) => {
    expect(isKernelRefusal(text)).toBe(false);
  });
  it('every constant is distinct and none is a prefix of another', () => {
    const texts = Object.values(KERNEL_REFUSALS);
    for (const a of texts) for (const b of texts) if (a !== b) expect(b.startsWith(a)).toBe(false);
  });
});

describe('tool outcomes', () => {
  it.each([
    ['ok', false, 'completed'],
    ['tool_error', true, 'failed'],
    ['refused', true, 'refused'],
    ['invalid', true, 'refused'],
    ['shadow_denied', true, 'shadowed'],
    ['unknown', true, 'unknown'],
  ] as const)('%s → isError %s, journal %s', (outcome, isError, status) => {
    expect(outcomeIsError(outcome)).toBe(isError);
    expect(callStatusForOutcome(outcome)).toBe(status);
  });
  it('covers every outcome', () => {
    expect([...TOOL_OUTCOMES].sort()).toEqual(['invalid', 'ok', 'refused', 'shadow_denied', 'tool_error', 'unknown']);
  });
});
