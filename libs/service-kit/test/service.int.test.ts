/**
 * runService in a real child process: real TCP readiness checks against Postgres and against a
 * port this test opens and closes, a real SIGTERM, real exit codes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import { TEST_DATABASE_URL, eventually, promtool, readinessBudgetMs } from '@everdict/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const FIXTURE = 'libs/service-kit/test/fixtures/service.ts';
const pg = new URL(TEST_DATABASE_URL);
const POSTGRES = `${pg.hostname}:${pg.port || '5432'}`;

interface Child {
  proc: ChildProcess;
  lines: string[];
  stderr: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  port: () => Promise<number>;
}

function startFixture(env: Record<string, string>): Child {
  const proc = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', FIXTURE], {
    cwd: repoRoot,
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', FIXTURE_POSTGRES: POSTGRES, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const stderr: string[] = [];
  let buf = '';
  proc.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    buf += chunk;
    const parts = buf.split('\n');
    buf = parts.pop() ?? '';
    lines.push(...parts.filter((l) => l.length > 0));
  });
  proc.stderr?.setEncoding('utf8').on('data', (chunk: string) => stderr.push(chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    proc.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const port = () =>
    eventually(
      () => {
        for (const l of lines) {
          if (!l.startsWith('{')) continue;
          const rec = JSON.parse(l) as { msg?: string; port?: number };
          if (rec.msg === 'health and metrics listening' && rec.port) return rec.port;
        }
        return undefined;
      },
      { what: `fixture to listen (stderr: ${stderr.join('')})`, timeoutMs: readinessBudgetMs() },
    );
  return { proc, lines, stderr, exited, port };
}

const hookLines = (c: Child) => c.lines.filter((l) => l.startsWith('HOOK ')).map((l) => l.slice(5));
const logRecords = (c: Child) => c.lines.filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);

/** A port that refuses connections now and that this test can open later. */
async function reservePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

async function get(port: number, path: string) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
}

describe('runService (child process)', () => {
  let probePort: number;
  let probe: Server | undefined;
  let child: Child;
  let port: number;

  beforeAll(async () => {
    probePort = await reservePort();
    child = startFixture({ FIXTURE_PROBE_PORT: String(probePort), FIXTURE_DRAIN_MS: '500' });
    port = await child.port();
  });

  afterAll(async () => {
    if (child.proc.exitCode === null && child.proc.signalCode === null) child.proc.kill('SIGKILL');
    await new Promise<void>((r) => (probe ? probe.close(() => r()) : r()));
  });

  it('serves /livez, and 404 for unknown paths', async () => {
    expect(await get(port, '/livez')).toMatchObject({ status: 200, text: 'ok\n' });
    expect((await get(port, '/nope')).status).toBe(404);
  });

  it('/readyz is 503 naming the unreachable dependency while Postgres passes', async () => {
    const body = await eventually(async () => {
      const r = await get(port, '/readyz');
      const b = JSON.parse(r.text) as { status: string; failing: string[]; checks: Record<string, { ok: boolean; error?: string }> };
      return r.status === 503 && b.status === 'not_ready' ? b : undefined;
    }, { what: 'readyz not_ready' });
    expect(body.failing).toEqual(['probe']);
    expect(body.checks.postgres?.ok).toBe(true);
    expect(body.checks.probe?.error).toMatch(/ECONNREFUSED/);
  });

  it('/readyz turns 200 once the dependency accepts connections', async () => {
    probe = createServer((s) => s.destroy());
    await new Promise<void>((r) => probe?.listen(probePort, '127.0.0.1', r));
    const r = await eventually(async () => {
      const res = await get(port, '/readyz');
      return res.status === 200 ? res : undefined;
    }, { what: 'readyz 200' });
    expect(JSON.parse(r.text)).toMatchObject({ ready: true, status: 'ready', failing: [] });
  });

  it('/metrics exposes everdict_ and process_ metrics in the Prometheus text format', async () => {
    const r = await get(port, '/metrics');
    expect(r.status).toBe(200);
    expect(r.type).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(r.text).toContain('everdict_bus_published_total{type="task.runnable",service="fixture"} 2');
    expect(r.text).toContain('everdict_outbox_lag_seconds{service="fixture"} 0.25');
    expect(r.text).toMatch(/^process_cpu_user_seconds_total\{service="fixture"\} /m);
    expect(r.text).toMatch(/^process_resident_memory_bytes/m);

    const check = promtool(['check', 'metrics'], { input: r.text });
    expect(check.output).toBe('');
    expect(check.status).toBe(0);
  });

  it('SIGTERM: readyz 503 during the drain, hooks in reverse order, exit 0 within 10 s', async () => {
    const t0 = performance.now();
    child.proc.kill('SIGTERM');
    // The drain-confirms hook sleeps 500 ms: readiness must already be 503 while it runs.
    await eventually(() => hookLines(child).includes('drain-confirms start'), { what: 'drain to start' });
    const during = await get(port, '/readyz');
    expect(hookLines(child)).not.toContain('drain-confirms done');
    expect(during.status).toBe(503);
    expect(JSON.parse(during.text)).toMatchObject({ ready: false, status: 'shutting_down' });

    const exit = await child.exited;
    expect(exit).toEqual({ code: 0, signal: null });
    expect(performance.now() - t0).toBeLessThan(10_000);
    expect(hookLines(child)).toEqual([
      'stop-consuming start aborted=true',
      'stop-consuming done',
      'drain-confirms start',
      'drain-confirms done',
      'close-pools done',
    ]);
    const last = logRecords(child).at(-1);
    expect(last).toMatchObject({ msg: 'shutdown complete', code: 0, service: 'fixture' });
  });
});

describe('runService failures', () => {
  it('a hook that never finishes: exit 1 after the configured deadline, naming the hook', async () => {
    const c = startFixture({ FIXTURE_PROBE_PORT: String(await reservePort()), FIXTURE_HANG: 'true', FIXTURE_DEADLINE_MS: '400' });
    try {
      await c.port();
      await eventually(() => logRecords(c).some((r) => r.msg === 'service started'), { what: 'service started' });
      const t0 = performance.now();
      c.proc.kill('SIGTERM');
      const exit = await c.exited;
      const elapsed = performance.now() - t0;
      expect(exit).toEqual({ code: 1, signal: null });
      expect(elapsed).toBeGreaterThanOrEqual(350);
      expect(elapsed).toBeLessThan(5_000);
      expect(hookLines(c)).toEqual(['stop-consuming start aborted=true']);
      expect(logRecords(c).find((r) => r.msg?.toString().startsWith('shutdown deadline exceeded'))).toMatchObject({ hook: 'stop-consuming', deadlineMs: 400 });
    } finally {
      if (c.proc.exitCode === null) c.proc.kill('SIGKILL');
    }
  });

  it('an invalid environment: exit 1, every offending variable named, no password printed', async () => {
    const c = startFixture({ PORT: 'http', FIXTURE_PROBE_PORT: '', DATABASE_URL: 'mysql://root:pw-do-not-print@db/x' });
    const exit = await c.exited;
    expect(exit).toEqual({ code: 1, signal: null });
    const out = c.lines.join('\n') + c.stderr.join('');
    expect(out).not.toContain('pw-do-not-print');
    const fatal = logRecords(c).find((r) => r.code === 'config_invalid');
    expect(fatal?.fields).toEqual([
      { name: 'DATABASE_URL', reason: 'must be a postgres:// or postgresql:// URL, got scheme "mysql:"' },
      { name: 'PORT', reason: 'must be an integer 0-65535 (0 picks a free port), got "http"' },
      { name: 'FIXTURE_PROBE_PORT', reason: 'is required but not set' },
    ]);
  });
});
