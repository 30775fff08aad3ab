/**
 * Provider failure classification, in one place. Every failure of `ModelClient.complete` is a
 * `ModelError` with one of four kinds; the runtime's retry policy reads only the kind:
 * - retryable: 429, 408, 5xx, 529, timeouts, resets and malformed bodies — the same request may succeed;
 * - provider_down: the endpoint is not there (connection refused, DNS) — park on provider health;
 * - invalid_request: other 4xx — the request itself is wrong, retrying cannot help;
 * - context_too_long: the provider's context-length error shapes — the runtime compacts or parks, never retries or fails.
 */
import { EverdictError } from '@everdict/contracts';

export const MODEL_ERROR_KINDS = ['retryable', 'provider_down', 'invalid_request', 'context_too_long'] as const;
export type ModelErrorKind = (typeof MODEL_ERROR_KINDS)[number];

interface ModelErrorInfo {
  readonly kind: ModelErrorKind;
  /** Short machine reason: `http_429`, `timeout`, `connection_refused`, `malformed_response`, … */
  readonly reason: string;
  readonly status?: number;
  readonly adapter: string;
  /** The provider's own error message, truncated; for operators, never for logs. */
  readonly providerMessage?: string;
  /** The provider's `Retry-After` (429/503), in ms: the floor of any retry or park backoff. */
  readonly retryAfterMs?: number;
}

export class ModelError extends EverdictError {
  readonly kind: ModelErrorKind;
  readonly reason: string;
  readonly status: number | undefined;
  readonly retryAfterMs: number | undefined;

  constructor(info: ModelErrorInfo, cause?: unknown) {
    super(`model_${info.kind}`, `${info.adapter} model call failed: ${info.kind} (${info.reason})`, {
      retryable: info.kind === 'retryable',
      cause,
      details: { ...info },
    });
    this.kind = info.kind;
    this.reason = info.reason;
    this.status = info.status;
    this.retryAfterMs = info.retryAfterMs;
  }
}

export function isModelError(err: unknown): err is ModelError {
  return err instanceof ModelError;
}

const CONTEXT_TOO_LONG = [
  /context[_ ]length/i, // OpenAI `context_length_exceeded`, vLLM "maximum context length"
  /maximum context/i,
  /prompt is too long/i, // Anthropic
  /exceeds? (the )?context (limit|window)/i, // Anthropic "input length and max_tokens exceed context limit"
  /too many (input )?tokens/i,
];

function looksLikeContextTooLong(code: string | undefined, message: string | undefined): boolean {
  if (code === 'context_length_exceeded' || code === 'string_above_max_length') return true;
  return message !== undefined && CONTEXT_TOO_LONG.some((re) => re.test(message));
}

/** Pulls `{error:{code,type,message}}` (OpenAI, Anthropic and most compatibles) out of a body. */
function providerErrorFields(body: string): { code?: string; type?: string; message?: string } {
  try {
    const parsed: unknown = JSON.parse(body);
    const error = (parsed as { error?: unknown })?.error;
    if (typeof error === 'string') return { message: error };
    if (error && typeof error === 'object') {
      const e = error as Record<string, unknown>;
      return {
        code: typeof e.code === 'string' ? e.code : undefined,
        type: typeof e.type === 'string' ? e.type : undefined,
        message: typeof e.message === 'string' ? e.message : undefined,
      };
    }
    return {};
  } catch {
    return { message: body.slice(0, 500) };
  }
}

/**
 * Classifies a non-2xx HTTP answer. `retryAfterMs` (the parsed `Retry-After`) is kept on the
 * retryable answers that define it, 429 and 503.
 */
export function classifyHttpFailure(adapter: string, status: number, body: string, retryAfterMs?: number): ModelError {
  const fields = providerErrorFields(body);
  const providerMessage = fields.message?.slice(0, 500);
  const base = { adapter, status, providerMessage, ...((status === 429 || status === 503) && retryAfterMs !== undefined ? { retryAfterMs } : {}) };
  if (status === 413 || ((status === 400 || status === 422) && looksLikeContextTooLong(fields.code, fields.message))) {
    return new ModelError({ ...base, kind: 'context_too_long', reason: `http_${status}` });
  }
  if (status === 408 || status === 409 || status === 425 || status === 429 || status >= 500) {
    return new ModelError({ ...base, kind: 'retryable', reason: `http_${status}` });
  }
  return new ModelError({ ...base, kind: 'invalid_request', reason: `http_${status}` });
}

const DOWN_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL']);

function errorCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

/** Classifies a failure to get any HTTP answer at all (fetch threw). */
export function classifyTransportFailure(adapter: string, err: unknown, timedOut: boolean): ModelError {
  if (timedOut) return new ModelError({ adapter, kind: 'retryable', reason: 'timeout' }, err);
  const code = errorCode(err);
  if (code !== undefined && DOWN_CODES.has(code)) {
    return new ModelError({ adapter, kind: 'provider_down', reason: code === 'ECONNREFUSED' ? 'connection_refused' : code.toLowerCase() }, err);
  }
  return new ModelError({ adapter, kind: 'retryable', reason: code ? code.toLowerCase() : 'transport_error' }, err);
}

export function malformedResponse(adapter: string, what: string, status?: number): ModelError {
  return new ModelError({ adapter, kind: 'retryable', reason: 'malformed_response', status, providerMessage: what });
}
