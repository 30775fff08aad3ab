/**
 * The health and metrics HTTP server every process runs on PORT (DESIGN §2, §7):
 *   GET /metrics  Prometheus text exposition of this process's registry
 *   GET /livez    200 while the event loop runs (no dependency checks: a broker outage must not
 *                 make the orchestrator restart every worker)
 *   GET /readyz   200 when started and every readiness check passes; otherwise 503 with a JSON
 *                 body naming the failing checks; 503 for good once shutdown began
 * Anything else is offered to the mounted route handlers in order (a service's JSON API shares
 * the port, see `RouteHandler`); what none of them takes is 404 (405 for a known health path
 * with a method other than GET/HEAD). The health paths always win over mounted routes.
 *
 * Availability: until the service has started (its routes are mounted during start) and once
 * shutdown began, every non-health path is answered 503 `not_ready` with `Retry-After`, never a
 * 404 for a route that is about to exist. A route that throws a retryable error (a database or
 * broker outage) is answered 503 `unavailable` with `Retry-After`; anything else thrown is 500.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isEverdictError } from '@everdict/contracts';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { ReadinessChecks } from './readiness.js';

/**
 * A mounted route handler: answers the request and resolves true, or resolves false without
 * touching `res` when the request is not one of its routes. A throw becomes a 500.
 */
export type RouteHandler = (req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>;

interface HttpServerOptions {
  /** TCP port; 0 picks a free one (read it back from the handle). */
  port: number;
  /** Interface to bind; default all interfaces. */
  host?: string;
  registry: Registry;
  readiness: ReadinessChecks;
  logger?: Logger;
  /**
   * Route handlers consulted, in order, for any path that is not a health path. Read on every
   * request, so handlers added to the array after the server started are served (default none).
   */
  routes?: readonly RouteHandler[];
}

export interface HttpServerHandle {
  readonly server: Server;
  /** The bound port (the real one when `port` was 0). */
  readonly port: number;
  /** Stops accepting, lets in-flight responses finish briefly, then drops remaining connections. */
  close(): Promise<void>;
}

/** How long in-flight responses get after `close()` before their sockets are dropped. */
const CLOSE_GRACE_MS = 500;

export async function startHttpServer(opts: HttpServerOptions): Promise<HttpServerHandle> {
  const server = createServer((req, res) => {
    handle(req, res, opts).catch((err: unknown) => {
      const retryable = isEverdictError(err) && err.retryable;
      if (retryable) opts.logger?.warn({ code: err.code, path: pathOf(req) }, 'dependency unavailable; answered 503');
      else opts.logger?.error({ err, path: pathOf(req) }, 'http handler failed');
      if (res.headersSent) res.destroy();
      else if (retryable) unavailable(res, 'unavailable', 'a dependency is unavailable; retry later');
      // The store's guard for text no edge refused first (see @everdict/http-api findBadText).
      else if (isEverdictError(err, 'invalid_text')) send(res, 400, 'application/json', JSON.stringify({ error: 'invalid_text', message: err.message }));
      else send(res, 500, 'application/json', JSON.stringify({ error: 'internal' }));
    });
  });
  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen(opts.port, opts.host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  server.on('error', (err) => opts.logger?.error({ err }, 'http server error'));
  const port = (server.address() as AddressInfo).port;
  let closing: Promise<void> | undefined;
  return {
    server,
    port,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS).unref();
      });
      return closing;
    },
  };
}

const ROUTES = new Set(['/metrics', '/livez', '/readyz']);

async function handle(req: IncomingMessage, res: ServerResponse, opts: HttpServerOptions): Promise<void> {
  const path = pathOf(req);
  if (!ROUTES.has(path)) {
    if (!opts.readiness.isServing) return unavailable(res, 'not_ready', 'the service is not ready; retry later');
    for (const route of opts.routes ?? []) {
      if (await route(req, res)) return;
    }
    send(res, 404, 'application/json', JSON.stringify({ error: 'not_found' }));
    return;
  }
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('allow', 'GET, HEAD');
    send(res, 405, 'application/json', JSON.stringify({ error: 'method_not_allowed' }));
    return;
  }
  switch (path) {
    case '/livez':
      send(res, 200, 'text/plain; charset=utf-8', 'ok\n');
      return;
    case '/readyz': {
      const report = await opts.readiness.evaluate();
      send(res, report.ready ? 200 : 503, 'application/json', JSON.stringify(report));
      return;
    }
    case '/metrics': {
      const text = await opts.registry.metrics();
      send(res, 200, opts.registry.contentType, text);
      return;
    }
  }
}

function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/** Seconds a client is told to wait before retrying a 503. */
export const RETRY_AFTER_SECONDS = 1;

function unavailable(res: ServerResponse, error: string, message: string): void {
  res.setHeader('retry-after', String(RETRY_AFTER_SECONDS));
  send(res, 503, 'application/json', JSON.stringify({ error, message }));
}

function send(res: ServerResponse, status: number, contentType: string, body: string): void {
  res.statusCode = status;
  res.setHeader('content-type', contentType);
  res.setHeader('cache-control', 'no-store');
  res.setHeader('content-length', Buffer.byteLength(body));
  res.end(res.req.method === 'HEAD' ? undefined : body);
}
