/**
 * Adapter for the Anthropic Messages API (`POST {baseUrl}/v1/messages`, non-streaming, tool_use).
 * Anthropic has no tool role: tool results travel as `tool_result` blocks in a user message, and
 * consecutive results are merged into one such message (the API requires alternating roles).
 */
import type { ChatMessage, ModelClient, ModelReply, ModelRequest, ModelToolCall, RouteIdentity } from './model.js';
import { malformedResponse } from './errors.js';
import { joinUrl, postJson, type FetchLike } from './http.js';

const ADAPTER = 'anthropic';
const ANTHROPIC_VERSION = '2023-06-01';
/** Anthropic requires max_tokens; used when neither the request nor the route sets it. */
const ANTHROPIC_DEFAULT_MAX_TOKENS = 4096;

interface AnthropicClientOptions {
  readonly route: RouteIdentity;
  /** Default https://api.anthropic.com */
  readonly baseUrl?: string;
  readonly apiKey?: string;
  /** Default 60 000 ms. */
  readonly timeoutMs?: number;
  readonly maxOutputTokens?: number;
  readonly fetch?: FetchLike;
}

type Block = Record<string, unknown>;
type WireMessage = { role: 'user' | 'assistant'; content: Block[] };

/** Tool-call arguments the model sent as text go back as the object they denote, or as {} when unparsable. */
function argumentsObject(text: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

function toBlocks(m: ChatMessage): { role: 'user' | 'assistant'; blocks: Block[] } {
  switch (m.role) {
    case 'user':
      return { role: 'user', blocks: [{ type: 'text', text: m.content }] };
    case 'assistant': {
      const blocks: Block[] = [];
      if (m.content !== null && m.content !== '') blocks.push({ type: 'text', text: m.content });
      for (const c of m.toolCalls) blocks.push({ type: 'tool_use', id: c.callId, name: c.name, input: argumentsObject(c.argumentsText) });
      return { role: 'assistant', blocks };
    }
    case 'tool':
      return { role: 'user', blocks: [{ type: 'tool_result', tool_use_id: m.callId, content: m.content, is_error: m.isError }] };
  }
}

export function anthropicRequestBody(model: string, req: ModelRequest, maxOutputTokens?: number): Record<string, unknown> {
  const messages: WireMessage[] = [];
  for (const m of req.messages) {
    const { role, blocks } = toBlocks(m);
    const last = messages.at(-1);
    if (last && last.role === role) last.content.push(...blocks);
    else messages.push({ role, content: blocks });
  }
  const body: Record<string, unknown> = {
    model,
    max_tokens: req.maxOutputTokens ?? maxOutputTokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS,
    messages,
  };
  if (req.system !== null && req.system !== '') body.system = req.system;
  if (req.tools.length > 0) body.tools = req.tools.map((t) => ({ name: t.name, description: t.description, input_schema: t.inputSchema }));
  return body;
}

const count = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null);

/** Measured input includes cache reads and writes when the provider reports them. */
function inputTokens(usage: Record<string, unknown> | undefined): number | null {
  const base = count(usage?.input_tokens);
  if (base === null) return null;
  return base + (count(usage?.cache_creation_input_tokens) ?? 0) + (count(usage?.cache_read_input_tokens) ?? 0);
}

export function parseAnthropicResponse(raw: string): ModelReply {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw malformedResponse(ADAPTER, 'body is not JSON');
  }
  const body = parsed as Record<string, unknown> | null;
  if (!body || !Array.isArray(body.content)) throw malformedResponse(ADAPTER, 'no content array');
  const texts: string[] = [];
  const toolCalls: ModelToolCall[] = [];
  body.content.forEach((b: unknown, i) => {
    const block = b as Record<string, unknown>;
    if (block?.type === 'text' && typeof block.text === 'string') texts.push(block.text);
    else if (block?.type === 'tool_use') {
      if (typeof block.name !== 'string') throw malformedResponse(ADAPTER, `content[${i}].name missing`);
      toolCalls.push({ argumentsText: JSON.stringify(block.input ?? {}), callId: typeof block.id === 'string' ? block.id : `toolu_${i}`, name: block.name });
    }
  });
  const usage = body.usage as Record<string, unknown> | undefined;
  // Keys in canonical order: the reply is journalled and hashed (canonicalJson writes it in one pass).
  return {
    finishReason: typeof body.stop_reason === 'string' ? body.stop_reason : null,
    output: { text: texts.length > 0 ? texts.join('\n') : null, toolCalls },
    providerModel: typeof body.model === 'string' ? body.model : null,
    raw,
    usage: { inputTokens: inputTokens(usage), outputTokens: count(usage?.output_tokens) },
  };
}

export function anthropicClient(opts: AnthropicClientOptions): ModelClient {
  const url = joinUrl(opts.baseUrl ?? 'https://api.anthropic.com', 'v1/messages');
  const headers: Record<string, string> = { 'anthropic-version': ANTHROPIC_VERSION };
  if (opts.apiKey) headers['x-api-key'] = opts.apiKey;
  return {
    route: opts.route,
    async complete(req, callOpts) {
      const raw = await postJson({
        adapter: ADAPTER,
        url,
        headers,
        body: JSON.stringify(anthropicRequestBody(opts.route.model, req, opts.maxOutputTokens)),
        timeoutMs: callOpts?.timeoutMs ?? opts.timeoutMs ?? 60_000,
        signal: callOpts?.signal,
        fetch: opts.fetch,
      });
      return parseAnthropicResponse(raw);
    },
  };
}
