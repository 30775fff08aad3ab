import { describe, expect, it } from 'vitest';
import { routeIdentity, scriptedClient, stepIndex, validateModelScript, type ChatMessage, type ModelRequest } from '@everdict/llm';

const route = routeIdentity('s', { adapter: 'scripted', model: 'script', scriptPath: 'x.json' });
const ask = (assistantTurns: number): ModelRequest => ({
  system: null,
  tools: [],
  messages: [{ role: 'user', content: 'go' }, ...Array.from({ length: assistantTurns }, () => ({ role: 'assistant' as const, content: 'x', toolCalls: [] }))],
});

describe('scripted adapter', () => {
  const script = {
    steps: [
      { toolCalls: [{ name: 'crm_get', arguments: { id: 1 } }], usage: { inputTokens: 3, outputTokens: 2 } },
      { toolCalls: [{ name: 'crm_get', argumentsText: '{broken' }] },
      { text: 'final', failFirst: { kind: 'retryable' as const, times: 1, status: 503 } },
    ],
  };

  it('answers from the request, not from a counter: any worker gets the same step', async () => {
    const a = scriptedClient({ route, script });
    const b = scriptedClient({ route, script });
    const first = await a.complete(ask(1));
    expect(first).toEqual(await b.complete(ask(1)));
    expect(first.output.toolCalls).toEqual([{ callId: 'call_1_0', name: 'crm_get', argumentsText: '{broken' }]);
    expect(first.usage).toEqual({ inputTokens: null, outputTokens: null });
    expect((await a.complete(ask(0))).usage).toEqual({ inputTokens: 3, outputTokens: 2 });
  });

  it('failFirst fails the first attempts, then answers', async () => {
    const c = scriptedClient({ route, script });
    await expect(c.complete(ask(2))).rejects.toMatchObject({ kind: 'retryable', status: 503 });
    expect((await c.complete(ask(2))).output.text).toBe('final');
  });

  it('a compacted request asks for the next step, not one its summary dropped', async () => {
    // Steps 0–3 called tools (ids call_<step>_0) and got results; a compaction replaced steps 0–2
    // with a summary and kept step 3's call and result.
    const compacted: ChatMessage[] = [
      { role: 'user', content: 'go' },
      { role: 'user', content: 'Summary of earlier work: …' },
      { role: 'assistant', content: null, toolCalls: [{ callId: 'call_3_0', name: 'crm_get', argumentsText: '{}' }] },
      { role: 'tool', callId: 'call_3_0', name: 'crm_get', content: '{}', isError: false },
    ];
    expect(stepIndex(compacted)).toBe(4);
    // Assistant messages after the newest call the adapter named are steps too (a text step, a
    // step whose call ids the script chose).
    const later: ChatMessage[] = [
      ...compacted,
      { role: 'assistant', content: 'thinking', toolCalls: [] },
      { role: 'user', content: 'an answer' },
      { role: 'assistant', content: null, toolCalls: [{ callId: 'mine', name: 'crm_get', argumentsText: '{}' }] },
    ];
    expect(stepIndex(later)).toBe(6);
    const steps = { steps: Array.from({ length: 5 }, (_, i) => ({ text: `step ${i}` })) };
    expect((await scriptedClient({ route, script: steps }).complete({ system: null, tools: [], messages: compacted })).output.text).toBe('step 4');
  });

  it('without call ids of its own in the request, the step is the number of assistant messages', () => {
    const plain: ChatMessage[] = [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: null, toolCalls: [{ callId: 'script_named', name: 'crm_get', argumentsText: '{}' }] },
      { role: 'tool', callId: 'script_named', name: 'crm_get', content: '{}', isError: false },
      { role: 'assistant', content: 'x', toolCalls: [] },
    ];
    expect(stepIndex(plain)).toBe(2);
    expect(stepIndex([{ role: 'user', content: 'go' }])).toBe(0);
  });

  it('an exhausted script is an invalid request', async () => {
    await expect(scriptedClient({ route, script }).complete(ask(3))).rejects.toMatchObject({ kind: 'invalid_request', reason: 'script_exhausted' });
  });

  it.each([
    [{}, 'steps'],
    [{ steps: [{ error: { kind: 'boom' } }] }, 'steps[0].error.kind'],
    [{ steps: [{ toolCalls: [{ arguments: {} }] }] }, 'steps[0].toolCalls[0].name'],
    [{ steps: [{ text: 'a', failFirst: { kind: 'retryable' } }] }, 'steps[0].failFirst.times'],
  ])('script validation names the field %#', (value, field) => {
    expect(() => validateModelScript(value)).toThrow(expect.objectContaining({ code: 'invalid_model_script', details: { field } }));
  });
});
