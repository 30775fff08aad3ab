import { describe, expect, it } from 'vitest';
import { anthropicRequestBody, openAiRequestBody, parseAnthropicResponse, parseOpenAiResponse, type ModelRequest } from '@everdict/llm';

const request: ModelRequest = {
  system: 'be brief',
  tools: [{ name: 'crm_get', description: 'get a customer', inputSchema: { type: 'object', properties: { id: { type: 'integer' } } } }],
  messages: [
    { role: 'user', content: 'who is 7?' },
    { role: 'assistant', content: null, toolCalls: [{ callId: 'c1', name: 'crm_get', argumentsText: '{"id":7}' }, { callId: 'c2', name: 'crm_get', argumentsText: '{"id":8}' }] },
    { role: 'tool', callId: 'c1', name: 'crm_get', content: 'Ada', isError: false },
    { role: 'tool', callId: 'c2', name: 'crm_get', content: 'not found', isError: true },
  ],
};

describe('Chat Completions wire format', () => {
  it('maps messages, tool calls and tool results', () => {
    expect(openAiRequestBody('gpt-x', request, 256)).toEqual({
      model: 'gpt-x',
      stream: false,
      max_tokens: 256,
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'who is 7?' },
        {
          role: 'assistant',
          content: null,
          tool_calls: [
            { id: 'c1', type: 'function', function: { name: 'crm_get', arguments: '{"id":7}' } },
            { id: 'c2', type: 'function', function: { name: 'crm_get', arguments: '{"id":8}' } },
          ],
        },
        { role: 'tool', tool_call_id: 'c1', content: 'Ada' },
        { role: 'tool', tool_call_id: 'c2', content: 'not found' },
      ],
      tools: [{ type: 'function', function: { name: 'crm_get', description: 'get a customer', parameters: request.tools[0]!.inputSchema } }],
    });
  });

  it('parses tool calls and measured usage; missing usage stays unknown', () => {
    const raw = JSON.stringify({
      id: 'chatcmpl-1',
      model: 'gpt-x-2026',
      choices: [{ index: 0, finish_reason: 'tool_calls', message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'crm_get', arguments: '{"id":7}' } }] } }],
      usage: { prompt_tokens: 50, completion_tokens: 9, total_tokens: 59 },
    });
    expect(parseOpenAiResponse(raw)).toEqual({
      output: { text: null, toolCalls: [{ callId: 'call_1', name: 'crm_get', argumentsText: '{"id":7}' }] },
      usage: { inputTokens: 50, outputTokens: 9 },
      finishReason: 'tool_calls',
      providerModel: 'gpt-x-2026',
      raw,
    });
    const bare = parseOpenAiResponse(JSON.stringify({ choices: [{ message: { content: 'hi' } }] }));
    expect(bare.usage).toEqual({ inputTokens: null, outputTokens: null });
  });

  it.each(['not json', '{"choices":[]}', '{"choices":[{"message":{"tool_calls":[{"function":{}}]}}]}'])('a malformed body is a retryable malformed_response: %s', (raw) => {
    expect(() => parseOpenAiResponse(raw)).toThrow(expect.objectContaining({ kind: 'retryable', reason: 'malformed_response' }));
  });
});

describe('Anthropic Messages wire format', () => {
  it('maps tool_use and merges consecutive tool_results into one user turn', () => {
    const body = anthropicRequestBody('claude-x', request);
    expect(body).toEqual({
      model: 'claude-x',
      max_tokens: 4096,
      system: 'be brief',
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'who is 7?' }] },
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 'c1', name: 'crm_get', input: { id: 7 } },
            { type: 'tool_use', id: 'c2', name: 'crm_get', input: { id: 8 } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'c1', content: 'Ada', is_error: false },
            { type: 'tool_result', tool_use_id: 'c2', content: 'not found', is_error: true },
          ],
        },
      ],
      tools: [{ name: 'crm_get', description: 'get a customer', input_schema: request.tools[0]!.inputSchema }],
    });
  });

  it('parses text and tool_use blocks and measured usage including cache tokens', () => {
    const raw = JSON.stringify({
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: 'claude-x-2026',
      stop_reason: 'tool_use',
      content: [
        { type: 'text', text: 'Looking it up.' },
        { type: 'tool_use', id: 'toolu_1', name: 'crm_get', input: { id: 7 } },
      ],
      usage: { input_tokens: 40, cache_read_input_tokens: 10, output_tokens: 12 },
    });
    expect(parseAnthropicResponse(raw)).toEqual({
      output: { text: 'Looking it up.', toolCalls: [{ callId: 'toolu_1', name: 'crm_get', argumentsText: '{"id":7}' }] },
      usage: { inputTokens: 50, outputTokens: 12 },
      finishReason: 'tool_use',
      providerModel: 'claude-x-2026',
      raw,
    });
  });

  it('a body without content is malformed', () => {
    expect(() => parseAnthropicResponse('{"type":"message"}')).toThrow(expect.objectContaining({ reason: 'malformed_response' }));
  });
});
