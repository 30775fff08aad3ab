/**
 * Adapter for any OpenAI-compatible Chat Completions endpoint (`POST {baseUrl}/chat/completions`,
 * non-streaming, function tools). The wire mapping is a pair of pure functions so it can be
 * checked without a server; `openAiClient` adds the single HTTP exchange.
 */
import type { ChatMessage, ModelClient, ModelReply, ModelRequest, ModelToolCall, RouteIdentity } from './model.js';
import { malformedResponse } from './errors.js';
import { joinUrl, postJson, type FetchLike } from './http.js';

const ADAPTER = 'openai';

interface OpenAiClientOptions {
  readonly route: RouteIdentity;
  readonly baseUrl: string;
  readonly apiKey?: string;
  /** Default 60 000 ms. */
  readonly timeoutMs?: number;
  readonly maxOutputTokens?: number;
  readonly fetch?: FetchLike;
}

type WireMessage = Record<string, unknown>;

function toWireMessage(m: ChatMessage): WireMessage {
  switch (m.role) {
    case 'user':
      return { role: 'user', content: m.content };
    case 'assistant':
      return m.toolCalls.length === 0
        ? { role: 'assistant', content: m.content ?? '' }
        : {
            role: 'assistant',
            content: m.content,
            tool_calls: m.toolCalls.map((c) => ({ id: c.callId, type: 'function', function: { name: c.name, arguments: c.argumentsText } })),
          };
    case 'tool':
      return { role: 'tool', tool_call_id: m.callId, content: m.content };
  }
}

export function openAiRequestBody(model: string, req: ModelRequest, maxOutputTokens?: number): Record<string, unknown> {
  const messages: WireMessage[] = [];
  if (req.system !== null && req.system !== '') messages.push({ role: 'system', content: req.system });
  for (const m of req.messages) messages.push(toWireMessage(m));
  const body: Record<string, unknown> = { model, messages, stream: false };
  if (req.tools.length > 0) {
    body.tools = req.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.inputSchema } }));
  }
  const max = req.maxOutputTokens ?? maxOutputTokens;
  if (max !== undefined) body.max_tokens = max;
  return body;
}

const count = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null);
/** A cost the provider reported (OpenRouter and some gateways send `usage.cost`); absent when it sent none. */
const reportedCost = (v: unknown): { cost?: number } => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? { cost: v } : {});

/** Parses a 2xx Chat Completions body; anything that is not that shape is a malformed response. */
export function parseOpenAiResponse(raw: string): ModelReply {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw malformedResponse(ADAPTER, 'body is not JSON');
  }
  const body = parsed as Record<string, unknown> | null;
  const choice = Array.isArray(body?.choices) ? (body.choices[0] as Record<string, unknown> | undefined) : undefined;
  const message = choice?.message as Record<string, unknown> | undefined;
  if (!message || typeof message !== 'object') throw malformedResponse(ADAPTER, 'no choices[0].message');
  const toolCalls: ModelToolCall[] = [];
  const wireCalls = message.tool_calls;
  if (wireCalls !== undefined && wireCalls !== null) {
    if (!Array.isArray(wireCalls)) throw malformedResponse(ADAPTER, 'tool_calls is not an array');
    wireCalls.forEach((c: unknown, i) => {
      const call = c as { id?: unknown; function?: { name?: unknown; arguments?: unknown } };
      const name = call?.function?.name;
      if (typeof name !== 'string') throw malformedResponse(ADAPTER, `tool_calls[${i}].function.name missing`);
      const args = call.function?.arguments;
      // Some compatible servers send an object; the kernel parses text, so keep one form.
      const argumentsText = typeof args === 'string' ? args : JSON.stringify(args ?? {});
      toolCalls.push({ argumentsText, callId: typeof call.id === 'string' && call.id !== '' ? call.id : `call_${i}`, name });
    });
  }
  const content = message.content;
  const usage = body?.usage as Record<string, unknown> | undefined;
  // Keys in canonical order: the reply is journalled and hashed (canonicalJson writes it in one pass).
  return {
    finishReason: typeof choice?.finish_reason === 'string' ? choice.finish_reason : null,
    output: { text: typeof content === 'string' ? content : null, toolCalls },
    providerModel: typeof body?.model === 'string' ? body.model : null,
    raw,
    usage: { ...reportedCost(usage?.cost), inputTokens: count(usage?.prompt_tokens), outputTokens: count(usage?.completion_tokens) },
  };
}

export function openAiClient(opts: OpenAiClientOptions): ModelClient {
  const url = joinUrl(opts.baseUrl, 'chat/completions');
  const headers: Record<string, string> = opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {};
  return {
    route: opts.route,
    async complete(req, callOpts) {
      const raw = await postJson({
        adapter: ADAPTER,
        url,
        headers,
        body: JSON.stringify(openAiRequestBody(opts.route.model, req, opts.maxOutputTokens)),
        timeoutMs: callOpts?.timeoutMs ?? opts.timeoutMs ?? 60_000,
        signal: callOpts?.signal,
        fetch: opts.fetch,
      });
      return parseOpenAiResponse(raw);
    },
  };
}
