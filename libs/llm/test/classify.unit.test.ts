import { describe, expect, it } from 'vitest';
import { classifyHttpFailure, classifyTransportFailure, ModelError } from '@everdict/llm';

const openAiError = (code: string | null, message: string) => JSON.stringify({ error: { message, type: 'invalid_request_error', param: null, code } });
const anthropicError = (type: string, message: string) => JSON.stringify({ type: 'error', error: { type, message } });

describe('classifyHttpFailure', () => {
  it.each([
    ['rate limited', 429, openAiError('rate_limit_exceeded', 'Rate limit reached'), 'retryable'],
    ['server error', 500, 'Internal Server Error', 'retryable'],
    ['bad gateway', 502, '<html>bad gateway</html>', 'retryable'],
    ['anthropic overloaded', 529, anthropicError('overloaded_error', 'Overloaded'), 'retryable'],
    ['request timeout', 408, '', 'retryable'],
    ['openai context length', 400, openAiError('context_length_exceeded', "This model's maximum context length is 8192 tokens."), 'context_too_long'],
    ['vllm context length (no code)', 400, JSON.stringify({ error: { message: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens" } }), 'context_too_long'],
    ['anthropic prompt too long', 400, anthropicError('invalid_request_error', 'prompt is too long: 210000 tokens > 200000 maximum'), 'context_too_long'],
    ['anthropic input + max_tokens over limit', 400, anthropicError('invalid_request_error', 'input length and `max_tokens` exceed context limit: 190000 + 20000 > 200000'), 'context_too_long'],
    ['request entity too large', 413, anthropicError('request_too_large', 'Request exceeds the maximum allowed number of bytes.'), 'context_too_long'],
    ['plain bad request', 400, openAiError(null, "Invalid value for 'tool_choice'"), 'invalid_request'],
    ['unauthorised', 401, anthropicError('authentication_error', 'invalid x-api-key'), 'invalid_request'],
    ['not found', 404, openAiError('model_not_found', 'The model does not exist'), 'invalid_request'],
  ])('%s → %s', (_c, status, body, kind) => {
    const err = classifyHttpFailure('openai', status, body as string);
    expect(err).toBeInstanceOf(ModelError);
    expect(err.kind).toBe(kind);
    expect(err.retryable).toBe(kind === 'retryable');
    expect(err.status).toBe(status);
  });
});

describe('classifyTransportFailure', () => {
  const fetchFailed = (code: string) => Object.assign(new TypeError('fetch failed'), { cause: Object.assign(new Error(code), { code }) });
  it.each([
    ['connection refused', fetchFailed('ECONNREFUSED'), false, 'provider_down', 'connection_refused'],
    ['dns failure', fetchFailed('ENOTFOUND'), false, 'provider_down', 'enotfound'],
    ['reset mid-response', fetchFailed('ECONNRESET'), false, 'retryable', 'econnreset'],
    ['our timeout', new DOMException('timed out', 'TimeoutError'), true, 'retryable', 'timeout'],
  ])('%s', (_c, err, timedOut, kind, reason) => {
    const e = classifyTransportFailure('anthropic', err, timedOut);
    expect([e.kind, e.reason]).toEqual([kind, reason]);
  });
});
