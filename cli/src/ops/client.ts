/**
 * The operator commands' HTTP client: EVERDICT_URL (the intake API; default
 * http://127.0.0.1:8080), EVERDICT_GATE_URL (the gate API; default EVERDICT_URL, as on a fleet
 * node running both) and EVERDICT_TOKEN (the bearer token; never printed).
 */
import { EverdictError } from '@everdict/contracts';
import { secretFromEnv } from '@everdict/service-kit';
import { UsageError } from '../args.js';

export interface ApiTarget {
  readonly url: string;
  readonly gateUrl: string;
  readonly token: string;
}

export function apiTarget(env: Readonly<Record<string, string | undefined>> = process.env): ApiTarget {
  // EVERDICT_TOKEN_FILE counts as EVERDICT_TOKEN (service-kit secretFiles.ts).
  const secret = secretFromEnv(env, 'EVERDICT_TOKEN');
  if (secret.problem) throw new UsageError(`${secret.problem.name}: ${secret.problem.reason}`);
  const token = secret.value;
  if (!token) throw new UsageError('EVERDICT_TOKEN is not set (the bearer token of a configured principal)');
  const url = (env['EVERDICT_URL'] ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
  const gateUrl = (env['EVERDICT_GATE_URL'] ?? url).replace(/\/+$/, '');
  for (const [name, v] of [['EVERDICT_URL', url], ['EVERDICT_GATE_URL', gateUrl]] as const) {
    if (!/^https?:\/\/[^/]/.test(v)) throw new UsageError(`${name} must be an http(s) URL`);
  }
  return { url, gateUrl, token };
}

/** An API refusal: its HTTP status and the server's error code, message and field. */
class ApiError extends EverdictError {
  constructor(readonly status: number, code: string, message: string, field?: string) {
    super(code, `${message}${field ? ` (field ${field})` : ''} [HTTP ${status}]`, { details: { status, ...(field ? { field } : {}) } });
  }
}

export async function request<T>(base: string, token: string, method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
  let res: Response;
  try {
    res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(30_000),
    });
  } catch (err) {
    throw new EverdictError('api_unreachable', `cannot reach ${base}: ${(err as Error).message}`, { retryable: true, cause: err });
  }
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text.length ? JSON.parse(text) : null;
  } catch {
    throw new ApiError(res.status, 'invalid_response', `${method} ${path} answered non-JSON`);
  }
  if (!res.ok) {
    const e = (parsed ?? {}) as { error?: string; message?: string; field?: string };
    throw new ApiError(res.status, e.error ?? 'http_error', e.message ?? `${method} ${path} failed`, e.field);
  }
  return parsed as T;
}
