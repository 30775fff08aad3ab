/** startHttpServer on its own, in-process and without signals: the endpoint contract. */
import { afterEach, describe, expect, it } from 'vitest';
import { ReadinessChecks, createMetrics, startHttpServer, type HttpServerHandle } from '../src/index.js';

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
    const { base, metrics } = await serve();
    metrics.bus.confirmed.inc(4);
    const m = await fetch(`${base}/metrics?x=1`);
    expect(m.status).toBe(200);
    expect(m.headers.get('content-type')).toBe(metrics.registry.contentType);
    expect(await m.text()).toContain('everdict_bus_confirmed_total{service="http-test"} 4');

    const live = await fetch(`${base}/livez`);
    expect([live.status, await live.text()]).toEqual([200, 'ok\n']);
    const head = await fetch(`${base}/livez`, { method: 'HEAD' });
    expect([head.status, await head.text()]).toEqual([200, '']);
    expect((await fetch(`${base}/`)).status).toBe(404);
    const post = await fetch(`${base}/readyz`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
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
