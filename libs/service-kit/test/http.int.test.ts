/** startHttpServer on its own, in-process and without signals: the endpoint contract. */
import { afterEach, describe, expect, it } from 'vitest';
import { EverdictError } from '@everdict/contracts';
import { ReadinessChecks, createMetrics, startHttpServer, type HttpServerHandle, type RouteHandler } from '../src/index.js';

let handle: HttpServerHandle | undefined;
afterEach(async () => {
  await handle?.close();
  handle = undefined;
});

async function serve(readiness = new ReadinessChecks({ timeoutMs: 200 })) {
  const metrics = createMetrics({ service: 'http-test' });
  handle = await startHttpServer({ port: 0, host: '127.0.0.1', registry: metrics.registry, readiness });
  return { base: `http://127.0.0.1:${handle.port}`, readiness, metrics };
}

describe('startHttpServer', () => {
  it('readyz: 503 starting → 200 ready → 503 naming a hung check → 503 shutting_down', async () => {
    let hung = false;
    const { base, readiness } = await serve();
    readiness.add('broker', () => (hung ? new Promise<void>(() => {}) : true));

    let res = await fetch(`${base}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ status: 'starting' });

    readiness.markStarted();
    res = await fetch(`${base}/readyz`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(await res.json()).toMatchObject({ ready: true, checks: { broker: { ok: true } } });

    hung = true;
    const t0 = performance.now();
    res = await fetch(`${base}/readyz`);
    expect(performance.now() - t0).toBeLessThan(1500);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ status: 'not_ready', failing: ['broker'], checks: { broker: { ok: false, error: 'timed out after 200 ms' } } });

    readiness.markShuttingDown();
    res = await fetch(`${base}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ status: 'shutting_down' });
  });

  it('metrics, livez, HEAD, 404 and 405', async () => {
    const { base, metrics, readiness } = await serve();
    metrics.bus.confirmed.inc(4);
    const m = await fetch(`${base}/metrics?x=1`);
    expect(m.status).toBe(200);
    expect(m.headers.get('content-type')).toBe(metrics.registry.contentType);
    expect(await m.text()).toContain('everdict_bus_confirmed_total{service="http-test"} 4');

    const live = await fetch(`${base}/livez`);
    expect([live.status, await live.text()]).toEqual([200, 'ok\n']);
    const head = await fetch(`${base}/livez`, { method: 'HEAD' });
    expect([head.status, await head.text()]).toEqual([200, '']);
    readiness.markStarted();
    expect((await fetch(`${base}/`)).status).toBe(404);
    const post = await fetch(`${base}/readyz`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
  });

  it('mounted routes: 503 + Retry-After before start and while draining, retryable throw → 503, other throw → 500', async () => {
    const metrics = createMetrics({ service: 'http-test' });
    const readiness = new ReadinessChecks({ timeoutMs: 200 });
    const routes: RouteHandler[] = [];
    handle = await startHttpServer({ port: 0, host: '127.0.0.1', registry: metrics.registry, readiness, routes });
    const base = `http://127.0.0.1:${handle.port}`;
    // Before start the route is not mounted yet: still 503, never 404.
    let res = await fetch(`${base}/v1/thing`);
    expect([res.status, res.headers.get('retry-after')]).toEqual([503, '1']);
    expect(await res.json()).toMatchObject({ error: 'not_ready' });
    routes.push(async (req, r) => {
      if (req.url === '/v1/down') throw new EverdictError('database_unavailable', 'database unavailable', { retryable: true });
      if (req.url === '/v1/bug') throw new Error('a bug');
      if (req.url === '/v1/text') throw new EverdictError('invalid_text', 'text contains a NUL character');
      r.end('ok');
      return true;
    });
    readiness.markStarted();
    expect((await fetch(`${base}/v1/thing`)).status).toBe(200);
    res = await fetch(`${base}/v1/down`);
    expect([res.status, res.headers.get('retry-after')]).toEqual([503, '1']);
    expect(await res.json()).toMatchObject({ error: 'unavailable' });
    expect((await fetch(`${base}/v1/bug`)).status).toBe(500);
    expect((await fetch(`${base}/v1/text`)).status).toBe(400);
    readiness.markShuttingDown();
    res = await fetch(`${base}/v1/thing`);
    expect([res.status, res.headers.get('retry-after')]).toEqual([503, '1']);
  });

  it('close() stops accepting connections and is idempotent', async () => {
    const { base } = await serve();
    const h = handle as HttpServerHandle;
    await Promise.all([h.close(), h.close()]);
    await expect(fetch(`${base}/livez`)).rejects.toThrow();
  });

  it('rejects when the port is taken', async () => {
    await serve();
    const taken = (handle as HttpServerHandle).port;
    await expect(startHttpServer({ port: taken, host: '127.0.0.1', registry: createMetrics({ service: 'x', defaultMetrics: false }).registry, readiness: new ReadinessChecks() })).rejects.toThrow(/EADDRINUSE/);
  });
});
