/**
 * The one HTTP exchange an adapter makes: POST JSON, read the whole body, classify failures.
 * No retries here (the runtime decides); a timeout aborts both the request and the body read.
 */
import { EverdictError, parseRetryAfterMs } from '@everdict/contracts';
import { classifyHttpFailure, classifyTransportFailure } from './errors.js';

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

interface HttpExchange {
  readonly adapter: string;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly timeoutMs: number;
  readonly signal?: AbortSignal;
  readonly fetch?: FetchLike;
}

/** Returns the 2xx body text; throws a classified `ModelError` otherwise. */
export async function postJson(x: HttpExchange): Promise<string> {
  if (x.signal?.aborted) throw new EverdictError('model_call_aborted', `${x.adapter} model call aborted by caller`);
  const timeout = AbortSignal.timeout(x.timeoutMs);
  const signal = x.signal ? AbortSignal.any([x.signal, timeout]) : timeout;
  const doFetch = x.fetch ?? fetch;
  let status: number;
  let text: string;
  let retryAfter: string | null;
  try {
    const res = await doFetch(x.url, { method: 'POST', headers: { 'content-type': 'application/json', ...x.headers }, body: x.body, signal });
    status = res.status;
    retryAfter = res.headers.get('retry-after');
    text = await res.text();
  } catch (err) {
    if (x.signal?.aborted) throw new EverdictError('model_call_aborted', `${x.adapter} model call aborted by caller`, { cause: err });
    throw classifyTransportFailure(x.adapter, err, timeout.aborted);
  }
  // An HTTP-date Retry-After is measured against this host's wall clock, as the header means.
  if (status < 200 || status > 299) throw classifyHttpFailure(x.adapter, status, text, parseRetryAfterMs(retryAfter, new Date().getTime()));
  return text;
}

export function joinUrl(base: string, path: string): string {
  return `${base.replace(/\/+$/, '')}/${path.replace(/^\/+/, '')}`;
}
