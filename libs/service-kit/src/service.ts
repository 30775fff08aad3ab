/**
 * `runService`: the composition root every Everdict process starts from (DESIGN §2).
 *
 * Startup, in order: validate the environment (a `ConfigError` is logged with every offending
 * variable and the process exits 1) → logger → metrics registry → health/metrics HTTP server on
 * PORT (so /livez and /metrics answer during a slow start; /readyz says `starting`) → signal
 * handlers → the service's `start(ctx)` → ready.
 *
 * Shutdown on SIGTERM/SIGINT (or `shutdown()`), in order:
 *   1. /readyz turns 503 for good and `ctx.signal` aborts — the first thing, before any close;
 *   2. shutdown hooks run in reverse registration order (stop consuming, finish units of work,
 *      drain publisher confirms, close pools);
 *   3. the HTTP server closes; the process exits 0 (1 if a hook failed or start failed).
 * The tracer provider (@everdict/tracing, one per process) starts with the logger; its hook is
 * registered first, so it runs last and flushes the spans every other hook ended.
 * The whole drain has a deadline (default 10 s, DESIGN §2): past it the process logs which hook
 * was still running and exits 1. A second signal during the drain exits 1 at once.
 */
import type { Logger } from 'pino';
import { loadEnvConfig, type EnvConfig, type EnvSpec, type EnvValues, ConfigError } from './config.js';
import { startHttpServer, type HttpServerHandle, type RouteHandler } from './http.js';
import { createLogger } from './logger.js';
import { createMetrics, type EverdictMetrics } from './metrics.js';
import { ReadinessChecks, type ReadinessCheck } from './readiness.js';
import { ShutdownHooks, type ShutdownHook } from './shutdown.js';
import { startTracing } from '@everdict/tracing';

type NoExtra = Record<never, never>;

export interface ServiceContext<S extends EnvSpec = NoExtra> {
  readonly name: string;
  readonly config: EnvConfig & EnvValues<S>;
  readonly logger: Logger;
  readonly metrics: EverdictMetrics;
  /** /readyz is 200 only while every check passes (false, a throw or a timeout fails it). */
  addReadinessCheck(name: string, check: ReadinessCheck): void;
  /** Register in the order resources are opened; hooks run in reverse (a stack). */
  onShutdown(name: string, fn: ShutdownHook): void;
  /** Aborted when shutdown begins: loops stop taking new work. */
  readonly signal: AbortSignal;
  /**
   * Mounts a service's HTTP routes on the process's server (same PORT as /metrics); handlers
   * are consulted in the order added, after the health paths.
   */
  addRoutes(handler: RouteHandler): void;
}

interface RunServiceOptions<S extends EnvSpec = NoExtra> {
  /** Service name: the `service` log field and metric label. */
  name: string;
  /** The spans' service.name (default `name`; `OTEL_SERVICE_NAME` overrides both). */
  traceName?: string;
  /** Overrides PORT; default: PORT (8080 if unset). */
  port?: number;
  /** The service's own environment variables (see `envVar`), validated with the base ones. */
  extraEnv?: S;
  /** Environment to read; default `process.env`. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Opens resources and starts consuming; the process is ready when it resolves. */
  start(ctx: ServiceContext<S>): Promise<void> | void;
  /** Deadline for the whole drain; default 10 000 ms (DESIGN §2). */
  shutdownDeadlineMs?: number;
  /** Per readiness check timeout; default 1000 ms. */
  readinessTimeoutMs?: number;
  /** Signals that start the drain; default SIGTERM and SIGINT. */
  signals?: readonly NodeJS.Signals[];
  /** Ends the process; default `process.exit`. */
  exit?: (code: number) => void;
}

export interface RunningService<S extends EnvSpec = NoExtra> {
  readonly context: ServiceContext<S>;
  /** Bound HTTP port. */
  readonly port: number;
  /** Runs the same drain a signal runs, then exits via `exit`. Idempotent. */
  shutdown(reason?: string): Promise<void>;
}

const DEFAULT_SHUTDOWN_DEADLINE_MS = 10_000;

export async function runService<S extends EnvSpec = NoExtra>(opts: RunServiceOptions<S>): Promise<RunningService<S>> {
  const exit = opts.exit ?? ((code: number) => process.exit(code));
  let config: EnvConfig & EnvValues<S>;
  try {
    config = loadEnvConfig<S>(opts.env ?? process.env, { serviceName: opts.name, ...(opts.extraEnv ? { extra: opts.extraEnv } : {}) });
  } catch (err) {
    const log = createLogger({ service: opts.name });
    if (err instanceof ConfigError) log.fatal({ code: err.code, fields: err.fields }, err.message);
    else log.fatal({ err }, 'configuration could not be loaded');
    exit(1);
    throw err;
  }

  const logger = createLogger({ service: opts.name, level: config.logLevel });
  // One tracer provider per process; its flush is the first hook registered, so the LAST to run.
  const tracing = await startTracing({ serviceName: opts.traceName ?? opts.name, env: opts.env ?? process.env });
  const metrics = createMetrics({ service: opts.name });
  const readiness = new ReadinessChecks({ timeoutMs: opts.readinessTimeoutMs ?? 1000 });
  const hooks = new ShutdownHooks(logger);
  hooks.add('tracing', () => tracing.shutdown());
  if (tracing.exporting) logger.info({ serviceName: tracing.serviceName }, 'tracing: exporting spans by OTLP/HTTP');
  const aborter = new AbortController();
  const deadlineMs = opts.shutdownDeadlineMs ?? DEFAULT_SHUTDOWN_DEADLINE_MS;
  const signals = opts.signals ?? ['SIGTERM', 'SIGINT'];

  const routes: RouteHandler[] = [];
  const http: HttpServerHandle = await startHttpServer({ port: opts.port ?? config.port, registry: metrics.registry, readiness, logger, routes });
  logger.info({ port: http.port }, 'health and metrics listening');

  let draining: Promise<void> | undefined;
  const shutdown = (reason: string, exitCode = 0): Promise<void> => {
    draining ??= drain(reason, exitCode);
    return draining;
  };

  const drain = async (reason: string, exitCode: number): Promise<void> => {
    // Readiness first: the orchestrator must stop routing here before anything closes.
    readiness.markShuttingDown();
    aborter.abort(new Error(`shutdown: ${reason}`));
    const started = performance.now();
    logger.info({ reason, hooks: hooks.order, deadlineMs }, 'shutdown started');
    // A ref'd timer on purpose: a hook awaiting a promise nothing will settle must not let the
    // event loop empty and the process exit 0 as if the drain had succeeded.
    const deadline = setTimeout(() => {
      logger.error({ hook: hooks.running, deadlineMs }, 'shutdown deadline exceeded; exiting without a clean drain');
      exit(1);
    }, deadlineMs);
    let code = exitCode;
    try {
      const report = await hooks.drain();
      if (report.failed.length > 0) code = 1;
      await http.close();
    } catch (err) {
      logger.error({ err }, 'shutdown failed');
      code = 1;
    } finally {
      clearTimeout(deadline);
    }
    removeProcessHandlers();
    logger.info({ code, ms: Math.round(performance.now() - started) }, 'shutdown complete');
    exit(code);
  };

  const onSignal = (signal: NodeJS.Signals) => {
    if (draining) {
      logger.warn({ signal }, 'second signal during shutdown; exiting now');
      exit(1);
      return;
    }
    void shutdown(`signal ${signal}`);
  };
  const onCrash = (err: unknown) => {
    logger.fatal({ err }, 'uncaught error; draining and exiting');
    void shutdown('uncaught error', 1);
  };
  for (const s of signals) process.on(s, onSignal);
  process.on('uncaughtException', onCrash);
  process.on('unhandledRejection', onCrash);
  const removeProcessHandlers = () => {
    for (const s of signals) process.off(s, onSignal);
    process.off('uncaughtException', onCrash);
    process.off('unhandledRejection', onCrash);
  };

  const context: ServiceContext<S> = {
    name: opts.name,
    config,
    logger,
    metrics,
    addReadinessCheck: (name, check) => readiness.add(name, check),
    onShutdown: (name, fn) => hooks.add(name, fn),
    signal: aborter.signal,
    addRoutes: (handler) => {
      routes.push(handler);
    },
  };

  try {
    await opts.start(context);
  } catch (err) {
    logger.fatal({ err }, 'service failed to start');
    await shutdown('start failed', 1);
    throw err;
  }
  if (!draining) {
    readiness.markStarted();
    logger.info({ readinessChecks: readiness.names }, 'service started');
  }
  return { context, port: http.port, shutdown: (reason = 'requested') => shutdown(reason) };
}
