/** K8: a withheld call is not a successful one; attribution comes from the tool_result event. */
import { describe, expect, it } from 'vitest';
import { isKernelRefusal, kernelRefusalCode } from '@everdict/contracts';
import { answer, call, harness, probeTool, toolResults } from './harness.js';

describe('K8 tool_result attribution', () => {
  it.each([
    // [case, tool options, scope forbids it?, expected event, content is a kernel refusal?]
    ['success whose text looks like an error is still a success', { output: 'Error: 0 rows (that is the answer)' }, false, { outcome: 'ok', isError: false, refusal: null }, false],
    ['handler-reported failure', { output: 'upstream 503', isError: true }, false, { outcome: 'tool_error', isError: true, refusal: null }, false],
    ['handler that throws', { throws: 'socket hang up' }, false, { outcome: 'tool_error', isError: true, refusal: null }, false],
    ['withheld by scope', {}, true, { outcome: 'refused', isError: true, refusal: 'forbidden' }, true],
  ])('%s', async (_c, opts, forbid, expected, refusalText) => {
    const tool = probeTool('crm_get', opts);
    const h = harness([call(['crm_get', {}]), answer('done')], [tool], { scope: { reads: 'all', writes: [], forbidden: forbid ? ['crm_get'] : [] } });
    const r = await h.run();
    expect(toolResults(r.events)[0]).toMatchObject(expected);
    const message = r.state.messages.find((m) => m.role === 'tool');
    expect(message?.role === 'tool' && message.isError).toBe(expected.isError);
    expect(isKernelRefusal(message?.role === 'tool' ? message.content : null)).toBe(refusalText);
    if (refusalText) expect(kernelRefusalCode(message?.role === 'tool' ? message.content : null)).toBe(expected.refusal);
  });
});
