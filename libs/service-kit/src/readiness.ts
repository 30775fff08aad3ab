/**
 * Readiness: may this process take work right now? (DESIGN §2: `/readyz`.)
 *
 * Invariants:
 * - Not ready until the service says it has started, and never ready again once shutdown began
 *   (the orchestrator must stop routing to a draining process first, before anything closes).
 * - Every check runs under a timeout: a hung Postgres or broker makes readiness fail fast, it
 *   never hangs the probe. A check still running from an earlier probe is joined, not started
 *   again, so a hung dependency costs one pending call, not one per probe.
 * - A check fails by returning `false` or by throwing / rejecting; anything else passes.
 */
import { redactUrlCredentials } from './secrets.js';

/** A dependency probe (e.g. `SELECT 1`, a broker channel check). `signal` aborts on timeout. */
export type ReadinessCheck = (signal: AbortSignal) => Promise<boolean | void> | boolean | void;

interface CheckResult {
  readonly ok: boolean;
  readonly ms: number;
  /** Why it failed; URL credentials removed. */
  readonly error?: string;
}

type ReadinessStatus = 'starting' | 'ready' | 'not_ready' | 'shutting_down';

interface ReadinessReport {
  readonly ready: boolean;
  readonly status: ReadinessStatus;
  /** Names of the failing checks (empty when ready, starting or shutting down). */
  readonly failing: readonly string[];
  readonly checks: Readonly<Record<string, CheckResult>>;
}

interface ReadinessOptions {
  /** Per-check timeout; default 1000 ms. */
  timeoutMs?: number;
  /** Treat the service as started from construction; default false (call `markStarted`). */
  started?: boolean;
}

export class ReadinessChecks {
  readonly timeoutMs: number;
  private readonly checks = new Map<string, ReadinessCheck>();
  private readonly inFlight = new Map<string, { attempt: Promise<CheckResult>; controller: AbortController }>();
  private started: boolean;
  private shuttingDown = false;

  constructor(opts: ReadinessOptions = {}) {
    this.timeoutMs = opts.timeoutMs ?? 1000;
    this.started = opts.started ?? false;
  }

  add(name: string, check: ReadinessCheck): void {
    if (this.checks.has(name)) throw new Error(`readiness check ${JSON.stringify(name)} is already registered`);
    this.checks.set(name, check);
  }

  get names(): readonly string[] {
    return [...this.checks.keys()];
  }

  markStarted(): void {
    this.started = true;
  }

  /** Permanent: once draining, the process reports not ready until it exits. */
  markShuttingDown(): void {
    this.shuttingDown = true;
  }

  /** Started and not draining: the process may serve its mounted routes. */
  get isServing(): boolean {
    return this.started && !this.shuttingDown;
  }

  get isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  async evaluate(): Promise<ReadinessReport> {
    if (this.shuttingDown) return { ready: false, status: 'shutting_down', failing: [], checks: {} };
    if (!this.started) return { ready: false, status: 'starting', failing: [], checks: {} };
    const names = [...this.checks.keys()];
    const results = await Promise.all(names.map((n) => this.run(n)));
    // A signal may have arrived while the checks ran; shutdown wins.
    if (this.shuttingDown) return { ready: false, status: 'shutting_down', failing: [], checks: {} };
    const checks: Record<string, CheckResult> = {};
    const failing: string[] = [];
    names.forEach((n, i) => {
      const r = results[i] as CheckResult;
      checks[n] = r;
      if (!r.ok) failing.push(n);
    });
    const ready = failing.length === 0;
    return { ready, status: ready ? 'ready' : 'not_ready', failing, checks };
  }

  private run(name: string): Promise<CheckResult> {
    let running = this.inFlight.get(name);
    if (!running) {
      const check = this.checks.get(name) as ReadinessCheck;
      const controller = new AbortController();
      const attempt = runCheck(check, controller.signal).finally(() => this.inFlight.delete(name));
      running = { attempt, controller };
      this.inFlight.set(name, running);
    }
    return withTimeout(running.attempt, this.timeoutMs, running.controller);
  }
}

async function runCheck(check: ReadinessCheck, signal: AbortSignal): Promise<CheckResult> {
  const started = performance.now();
  try {
    const verdict = await check(signal);
    return verdict === false
      ? { ok: false, ms: elapsed(started), error: 'check returned false' }
      : { ok: true, ms: elapsed(started) };
  } catch (err) {
    return { ok: false, ms: elapsed(started), error: describe(err) };
  }
}

/** Races the (possibly shared) attempt against this probe's own timer; a timeout aborts the attempt. */
async function withTimeout(attempt: Promise<CheckResult>, timeoutMs: number, controller: AbortController): Promise<CheckResult> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<CheckResult>((resolve) => {
    timer = setTimeout(() => {
      const error = `timed out after ${timeoutMs} ms`;
      controller.abort(new Error(error));
      resolve({ ok: false, ms: timeoutMs, error });
    }, timeoutMs);
  });
  try {
    return await Promise.race([attempt, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
function elapsed(since: number): number {
  return Math.round(performance.now() - since);
}

function describe(err: unknown): string {
  const text = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  return redactUrlCredentials(text).slice(0, 300);
}
