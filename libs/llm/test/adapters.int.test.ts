/** Both HTTP adapters against a local server speaking the real wire formats (non-streaming). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createModelClient, isModelError, type ModelClient, type ModelRequest } from '@everdict/llm';
import { closedPort, providerServer } from '@everdict/testkit';

const request: ModelRequest = {
  system: 'be brief',
  messages: [{ role: 'user', content: 'who is customer 7?' }],
  tools: [{ name: 'crm_get', description: 'get a customer', inputSchema: { type: 'object', properties: { id: { type: 'integer' } }, required: ['id'] } }],
};

const chatCompletion = JSON.stringify({
  id: 'chatcmpl-abc',
  object: 'chat.completion',
  model: 'gpt-test-2026',
  choices: [{ index: 0, finish_reason: 'tool_calls', message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_9', type: 'function', function: { name: 'crm_get', arguments: '{"id":7}' } }] } }],
  usage: { prompt_tokens: 61, completion_tokens: 17, total_tokens: 78 },
});
const anthropicMessage = JSON.stringify({
  id: 'msg_abc',
  type: 'message',
  role: 'assistant',
  model: 'claude-test-2026',
  stop_reason: 'tool_use',
  content: [
    { type: 'text', text: 'Let me check.' },
    { type: 'tool_use', id: 'toolu_9', name: 'crm_get', input: { id: 7 } },
  ],
  usage: { input_tokens: 70, output_tokens: 21 },
});

let server: Awaited<ReturnType<typeof providerServer>>;
beforeAll(async () => {
  server = await providerServer();
});
afterAll(() => server.close());

const env = { TEST_KEY: 'sk-test-123' };
// A reply the provider sends at once must never hit the timeout, however loaded the machine;
// only the case that tests the timeout shortens it, under a reply held back much longer.
const clients: Record<string, (timeoutMs?: number) => ModelClient> = {
  openai: (timeoutMs = 10_000) => createModelClient('chat', { adapter: 'openai', model: 'gpt-test', baseUrl: `${server.baseUrl}/v1`, apiKeyEnv: 'TEST_KEY', timeoutMs }, { env }),
  anthropic: (timeoutMs = 10_000) => createModelClient('msgs', { adapter: 'anthropic', model: 'claude-test', baseUrl: server.baseUrl, apiKeyEnv: 'TEST_KEY', timeoutMs, maxOutputTokens: 512 }, { env }),
};

async function failure(client: ModelClient): Promise<{ kind: string; reason: string; status?: number }> {
  try {
    await client.complete(request);
  } catch (err) {
    if (isModelError(err)) return { kind: err.kind, reason: err.reason, ...(err.status === undefined ? {} : { status: err.status }) };
    throw err;
  }
  throw new Error('expected a failure');
}

describe('openai-compatible Chat Completions adapter', () => {
  it('sends a real Chat Completions request and parses tool_calls and usage', async () => {
    server.reply({ status: 200, body: chatCompletion });
    const reply = await clients.openai!().complete(request);
    expect(reply.output).toEqual({ text: null, toolCalls: [{ callId: 'call_9', name: 'crm_get', argumentsText: '{"id":7}' }] });
    expect(reply.usage).toEqual({ inputTokens: 61, outputTokens: 17 });
    expect(reply.raw).toBe(chatCompletion);
    const sent = server.received.at(-1)!;
    expect(sent.url).toBe('/v1/chat/completions');
    expect(sent.headers.authorization).toBe('Bearer sk-test-123');
    expect(sent.body).toMatchObject({ model: 'gpt-test', stream: false, messages: [{ role: 'system' }, { role: 'user' }], tools: [{ type: 'function', function: { name: 'crm_get' } }] });
  });
});

describe('Anthropic Messages adapter', () => {
  it('sends a real Messages request and parses tool_use and usage', async () => {
    server.reply({ status: 200, body: anthropicMessage });
    const reply = await clients.anthropic!().complete(request);
    expect(reply.output).toEqual({ text: 'Let me check.', toolCalls: [{ callId: 'toolu_9', name: 'crm_get', argumentsText: '{"id":7}' }] });
    expect(reply.usage).toEqual({ inputTokens: 70, outputTokens: 21 });
    const sent = server.received.at(-1)!;
    expect(sent.url).toBe('/v1/messages');
    expect(sent.headers['x-api-key']).toBe('sk-test-123');
    expect(sent.headers['anthropic-version']).toBe('2023-06-01');
    expect(sent.body).toMatchObject({ model: 'claude-test', max_tokens: 512, system: 'be brief', tools: [{ name: 'crm_get', input_schema: { type: 'object' } }] });
  });
});

describe.each(['openai', 'anthropic'])('%s adapter failures are classified', (adapter) => {
  const errorBody = (message: string, code?: string) =>
    adapter === 'openai' ? JSON.stringify({ error: { message, type: 'invalid_request_error', code: code ?? null } }) : JSON.stringify({ type: 'error', error: { type: 'invalid_request_error', message } });

  it.each([
    ['429 rate limit', { status: 429, body: '{"error":{"message":"slow down"}}' }, { kind: 'retryable', reason: 'http_429', status: 429 }],
    ['500 server error', { status: 500, body: 'oops' }, { kind: 'retryable', reason: 'http_500', status: 500 }],
    ['200 with malformed JSON', { status: 200, body: '{"choices": [' }, { kind: 'retryable', reason: 'malformed_response' }],
    ['a timeout', { status: 200, body: '{}', delayMs: 3_000 }, { kind: 'retryable', reason: 'timeout' }],
    ['400 bad request', { status: 400, body: '{"error":{"message":"bad tool_choice"}}' }, { kind: 'invalid_request', reason: 'http_400', status: 400 }],
  ])('%s', async (_c, programmed, expected) => {
    server.reply(programmed);
    expect(await failure(clients[adapter]!('delayMs' in programmed ? 300 : undefined))).toEqual(expected);
  });

  it('the provider context-length error', async () => {
    const body = adapter === 'openai' ? errorBody("This model's maximum context length is 8192 tokens.", 'context_length_exceeded') : errorBody('prompt is too long: 210000 tokens > 200000 maximum');
    server.reply({ status: 400, body });
    expect(await failure(clients[adapter]!())).toMatchObject({ kind: 'context_too_long' });
  });

  it('connection refused means the provider is down', async () => {
    const port = await closedPort();
    const route = adapter === 'openai' ? { adapter: 'openai' as const, model: 'm', baseUrl: `http://127.0.0.1:${port}/v1` } : { adapter: 'anthropic' as const, model: 'm', baseUrl: `http://127.0.0.1:${port}` };
    expect(await failure(createModelClient('down', route))).toEqual({ kind: 'provider_down', reason: 'connection_refused' });
  });
});
