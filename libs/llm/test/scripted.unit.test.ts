import { describe, expect, it } from 'vitest';
import { routeIdentity, scriptedClient, validateModelScript, type ModelRequest } from '@everdict/llm';

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
