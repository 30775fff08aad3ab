import { describe, expect, it } from 'vitest';
import { ReadinessChecks, ShutdownHooks, createLogger } from '../src/index.js';

const quietLogger = () => {
  const lines: string[] = [];
  return { lines, logger: createLogger({ service: 'unit', level: 'debug', destination: { write: (s: string) => void lines.push(s) } }) };
};

describe('ReadinessChecks', () => {
  it('is not ready while starting, ready once started with passing checks', async () => {
    const r = new ReadinessChecks();
    r.add('db', async () => true);
    r.add('void', () => undefined);
    expect(await r.evaluate()).toMatchObject({ ready: false, status: 'starting' });
    r.markStarted();
    const report = await r.evaluate();
    expect(report).toMatchObject({ ready: true, status: 'ready', failing: [] });
    expect(Object.keys(report.checks)).toEqual(['db', 'void']);
  });

  it('names each failing check: false, throw, rejection and timeout', async () => {
    const r = new ReadinessChecks({ timeoutMs: 100, started: true });
    r.add('ok', async () => {});
    r.add('false', async () => false);
    r.add('throws', () => {
      throw new Error('connect ECONNREFUSED 127.0.0.1:1 for postgres://u:pw-123@h/d');
    });
    r.add('rejects', async () => Promise.reject(new Error('boom')));
    r.add('hangs', () => new Promise<void>(() => {}));
    const t0 = performance.now();
    const report = await r.evaluate();
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(report.ready).toBe(false);
    expect(report.status).toBe('not_ready');
    expect(report.failing).toEqual(['false', 'throws', 'rejects', 'hangs']);
    expect(report.checks.hangs?.error).toBe('timed out after 100 ms');
    expect(report.checks.throws?.error).toContain('ECONNREFUSED');
    expect(JSON.stringify(report)).not.toContain('pw-123');
  });

  it('aborts a timed-out check and joins a still-running one instead of piling up calls', async () => {
    const r = new ReadinessChecks({ timeoutMs: 50, started: true });
    let calls = 0;
    let aborted = 0;
    r.add('stubborn', (signal) => {
      calls++;
      signal.addEventListener('abort', () => aborted++);
      return new Promise<void>(() => {}); // ignores the abort: a badly behaved driver
    });
    await r.evaluate();
    await r.evaluate();
    await Promise.all([r.evaluate(), r.evaluate()]);
    expect(calls).toBe(1);
    expect(aborted).toBe(1);
  });

  it('reports shutting_down permanently, even when every check passes', async () => {
    const r = new ReadinessChecks({ started: true });
    r.add('db', () => true);
    expect((await r.evaluate()).ready).toBe(true);
    r.markShuttingDown();
    r.markStarted();
    expect(await r.evaluate()).toEqual({ ready: false, status: 'shutting_down', failing: [], checks: {} });
  });

  it('refuses a duplicate check name', () => {
    const r = new ReadinessChecks();
    r.add('db', () => true);
    expect(() => r.add('db', () => true)).toThrow(/already registered/);
  });
});

describe('ShutdownHooks', () => {
  it('runs hooks once each, in reverse registration order, and keeps going past a failure', async () => {
    const { logger, lines } = quietLogger();
    const hooks = new ShutdownHooks(logger);
    const ran: string[] = [];
    hooks.add('close-pool', () => void ran.push('close-pool'));
    hooks.add('drain-confirms', async () => {
      await new Promise((r) => setTimeout(r, 10));
      ran.push('drain-confirms');
      throw new Error('confirm channel closed');
    });
    hooks.add('stop-consuming', () => void ran.push('stop-consuming'));
    expect(hooks.order).toEqual(['stop-consuming', 'drain-confirms', 'close-pool']);
    const report = await hooks.drain();
    expect(ran).toEqual(['stop-consuming', 'drain-confirms', 'close-pool']);
    expect(report.failed).toEqual(['drain-confirms']);
    expect(lines.join('')).toContain('shutdown hook failed');
    expect((await hooks.drain()).failed).toEqual([]);
    expect(ran).toHaveLength(3);
  });

  it('runs a hook registered during the drain right away and counts its failure', async () => {
    const { logger } = quietLogger();
    const hooks = new ShutdownHooks(logger);
    const ran: string[] = [];
    hooks.add('first', () => {
      hooks.add('late', () => {
        ran.push('late');
        throw new Error('late close failed');
      });
      ran.push('first');
    });
    const report = await hooks.drain();
    expect(ran).toEqual(['late', 'first']);
    expect(report.failed).toEqual(['late']);
  });
});
