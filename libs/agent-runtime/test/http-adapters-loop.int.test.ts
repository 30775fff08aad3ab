/**
 * The kernel over the real HTTP adapters against a local provider server: provider failures
 * (429, 500, timeout, malformed JSON) and malformed model output are classified and decided;
 * none crashes the loop.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createModelClient } from '@everdict/llm';
import { runToSettlement } from '@everdict/agent-runtime';
import { harness, probeTool, toolResults } from './harness.js';
import { providerServer } from '@everdict/testkit';

let server: Awaited<ReturnType<typeof providerServer>>;
beforeAll(async () => {
  server = await providerServer();
});
afterAll(() => server.close());

const completion = (message: object, usage?: object) => JSON.stringify({ id: 'x', model: 'gpt-test', choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', ...message } }], ...(usage ? { usage } : {}) });
const toolCall = (id: string, args: string) => completion({ content: null, tool_calls: [{ id, type: 'function', function: { name: 'crm_get', arguments: args } }] }, { prompt_tokens: 10, completion_tokens: 5 });
const message = (content: object[], usage?: object) => JSON.stringify({ id: 'm', type: 'message', role: 'assistant', model: 'claude-test', stop_reason: 'end_turn', content, ...(usage ? { usage } : {}) });

describe('kernel over HTTP adapters', () => {
  it('Chat Completions: retries 429/500/malformed, feeds back bad arguments, completes', async () => {
    const crm = probeTool('crm_get', { output: 'Ada Lovelace', inputSchema: { type: 'object', required: ['id'], properties: { id: { type: 'integer' } } } });
    const h = harness([], [crm], { policy: { modelAttempts: 3 } });
    const model = createModelClient('chat', { adapter: 'openai', model: 'gpt-test', baseUrl: `${server.baseUrl}/v1`, timeoutMs: 10_000 });
    server.received.length = 0;
    server.reply(
      { status: 429, body: '{"error":{"message":"slow down"}}' },
      { status: 500, body: 'boom' },
      { status: 200, body: toolCall('call_a', '{"id":7}') },
      { status: 200, body: '{"choices": [' }, // malformed body: retried
      { status: 200, body: toolCall('call_b', '{"id": 7,') }, // model output that is not JSON
      { status: 200, body: completion({ content: 'Customer 7 is Ada Lovelace.' }) }, // no usage reported
    );
    const r = await runToSettlement({ ...h.deps, model }, h.ctx, h.start);
    expect(r.settlement).toEqual({ kind: 'completed', result: 'Customer 7 is Ada Lovelace.' });
    expect(crm.calls).toEqual([{ id: 7 }]);
    expect(toolResults(r.events).map((e) => e.outcome)).toEqual(['ok', 'invalid']);
    // Backoffs 250, 500, 250 ms with the fleet's equal jitter: each drawn from [base/2, base].
    expect(h.clock.sleeps).toHaveLength(3);
    h.clock.sleeps.forEach((s, i) => expect(s).toSatisfy((v: number) => v >= [250, 500, 250][i]! / 2 && v <= [250, 500, 250][i]!));
    expect(r.state.usage).toMatchObject({ measuredTokens: 30, unmeasuredModelCalls: 1 });
    // The tool results went back on the wire as tool messages.
    const last = server.received.at(-1)!.body as { messages: { role: string; tool_call_id?: string; content: string }[] };
    const tools = last.messages.filter((m) => m.role === 'tool');
    expect(tools.map((m) => m.tool_call_id)).toEqual(['call_a', 'call_b']);
    expect(tools[1]!.content).toMatch(/^Kernel refusal \[invalid_action_document\]/);
  });

  it('Chat Completions: 500 on every attempt suspends the run as provider_down', async () => {
    const h = harness([], [probeTool('crm_get')]);
    const model = createModelClient('chat', { adapter: 'openai', model: 'gpt-test', baseUrl: `${server.baseUrl}/v1`, timeoutMs: 10_000 });
    server.reply({ status: 500, body: 'a' }, { status: 502, body: 'b' }, { status: 503, body: 'c' });
    const r = await runToSettlement({ ...h.deps, model }, h.ctx, h.start);
    expect(r.settlement).toMatchObject({ kind: 'suspended', parkReason: 'provider_down' });
    expect(r.events.filter((e) => e.type === 'model_error')).toHaveLength(3);
  });

  it('Anthropic Messages: a timeout is retried, tool_use runs, tool_result goes back', async () => {
    const crm = probeTool('crm_get', { output: 'Ada' });
    const h = harness([], [crm]);
    // The first reply outlasts the timeout many times over; the replies after it must fit in it
    // however loaded the machine.
    const model = createModelClient('msgs', { adapter: 'anthropic', model: 'claude-test', baseUrl: server.baseUrl, timeoutMs: 2_000 });
    server.received.length = 0;
    server.reply(
      { status: 200, body: '{}', delayMs: 8_000 },
      { status: 200, body: message([{ type: 'tool_use', id: 'toolu_1', name: 'crm_get', input: { id: 7 } }], { input_tokens: 20, output_tokens: 6 }) },
      { status: 200, body: message([{ type: 'text', text: 'It is Ada.' }], { input_tokens: 30, output_tokens: 4 }) },
    );
    const r = await runToSettlement({ ...h.deps, model }, h.ctx, h.start);
    expect(r.settlement).toEqual({ kind: 'completed', result: 'It is Ada.' });
    expect(crm.calls).toEqual([{ id: 7 }]);
    const last = server.received.at(-1)!.body as { messages: { role: string; content: { type: string; tool_use_id?: string; is_error?: boolean }[] }[] };
    expect(last.messages.at(-1)).toEqual({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'Ada', is_error: false }] });
    expect(r.state.usage.measuredTokens).toBe(60);
  });
});
