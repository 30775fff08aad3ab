/**
 * One HTTP exchange, reported as what is KNOWN about it rather than as success or failure:
 * - `not_sent`: the connection was never established, so no byte of the request left us;
 * - `lost`: a connection existed, so the target may have received and acted on the request,
 *   but no status line came back (reset, hang-up, deadline);
 * - `response`: a status line arrived (the body may be incomplete).
 * Every exchange uses a fresh connection (no keep-alive agent): a reused socket that fails
 * could otherwise be mistaken for one that never carried the request.
 */
import http from 'node:http';
import https from 'node:https';

export type HttpAttempt =
  | { readonly kind: 'response'; readonly status: number; readonly body: string; readonly complete: boolean }
  | { readonly kind: 'not_sent'; readonly cause: string }
  | { readonly kind: 'lost'; readonly cause: string };

export interface HttpExchange {
  readonly method: string;
  readonly url: URL;
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string;
  readonly timeoutMs: number;
  readonly maxResponseBytes: number;
  readonly signal?: AbortSignal;
}

const causeOf = (err: unknown): string => {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : err instanceof Error ? err.message.slice(0, 200) : 'unknown';
};

export function sendHttp(ex: HttpExchange): Promise<HttpAttempt> {
  return new Promise((resolve) => {
    let connected = false;
    let settled = false;
    let status: number | undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    let truncated = false;

    const body = () => Buffer.concat(chunks).toString('utf8');
    const finish = (attempt: HttpAttempt) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      ex.signal?.removeEventListener('abort', onAbort);
      resolve(attempt);
    };
    const fail = (cause: string) => {
      if (status !== undefined) finish({ kind: 'response', status, body: body(), complete: false });
      else finish(connected ? { kind: 'lost', cause } : { kind: 'not_sent', cause });
    };

    const headers: Record<string, string> = { ...ex.headers };
    if (ex.body !== undefined) headers['content-length'] = String(Buffer.byteLength(ex.body));
    const lib = ex.url.protocol === 'https:' ? https : http;
    const req = lib.request(ex.url, { method: ex.method, headers, agent: false });

    req.on('socket', (socket) => {
      if (!socket.connecting) connected = true;
      else socket.once('connect', () => (connected = true));
    });
    req.on('error', (err) => fail(causeOf(err)));
    req.on('response', (res) => {
      status = res.statusCode ?? 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= ex.maxResponseBytes) chunks.push(chunk);
        else truncated = true;
      });
      res.on('end', () => finish({ kind: 'response', status: status ?? 0, body: body(), complete: !truncated }));
      res.on('error', (err) => fail(causeOf(err)));
      res.on('close', () => fail('closed'));
    });

    const deadline = setTimeout(() => {
      req.destroy();
      fail('timeout');
    }, ex.timeoutMs);
    const onAbort = () => {
      req.destroy();
      fail('aborted');
    };
    if (ex.signal?.aborted) onAbort();
    else ex.signal?.addEventListener('abort', onAbort, { once: true });

    req.end(ex.body);
  });
}
