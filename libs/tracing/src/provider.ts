/**
 * One tracer provider per process, started by service-kit's runService and shut down (flushed)
 * as the LAST shutdown hook, after every other hook ended its spans.
 *
 * Export is on exactly when `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
 * is set, and not turned off by `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`. The
 * exporter reads the other standard variables itself (endpoint, headers, timeout); the batch
 * processor takes OTEL_BSP_* from batchOptions;
 * `OTEL_SERVICE_NAME` overrides the process's service name.
 *
 * Off, no SDK module is even loaded (they are imported dynamically below): the API's no-op
 * tracer answers every span. Either way an AsyncLocalStorage context manager is registered, so
 * an incoming traceparent stays the active context through a handler and is stamped into what
 * the handler sends (propagation costs one context frame per span, nothing else).
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { spansRecorded } from './spans.js';

export interface Tracing {
  /** Whether spans are recorded and exported (false: the no-op tracer). */
  readonly exporting: boolean;
  /** The service.name of this process's spans. */
  readonly serviceName: string;
  /** Flushes recorded spans and stops the provider. Idempotent. */
  shutdown(): Promise<void>;
}

type Env = Readonly<Record<string, string | undefined>>;

/** Whether the environment asks for OTLP export (the decision, without any I/O). */
export function exportConfigured(env: Env): boolean {
  if ((env['OTEL_SDK_DISABLED'] ?? '').trim().toLowerCase() === 'true') return false;
  if ((env['OTEL_TRACES_EXPORTER'] ?? '').trim().toLowerCase() === 'none') return false;
  return (env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] ?? env['OTEL_EXPORTER_OTLP_ENDPOINT'] ?? '').trim() !== '';
}

/** The standard OTEL_BSP_* variables (this SDK's processor takes them only as options). */
export function batchOptions(env: Env): { scheduledDelayMillis?: number; maxExportBatchSize?: number; maxQueueSize?: number; exportTimeoutMillis?: number } {
  const num = (name: string): number | undefined => {
    const v = Number((env[name] ?? '').trim());
    return (env[name] ?? '').trim() !== '' && Number.isFinite(v) && v > 0 ? v : undefined;
  };
  const out: Record<string, number> = {};
  const put = (key: string, name: string) => {
    const v = num(name);
    if (v !== undefined) out[key] = v;
  };
  put('scheduledDelayMillis', 'OTEL_BSP_SCHEDULE_DELAY');
  put('maxExportBatchSize', 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE');
  put('maxQueueSize', 'OTEL_BSP_MAX_QUEUE_SIZE');
  put('exportTimeoutMillis', 'OTEL_BSP_EXPORT_TIMEOUT');
  return out;
}

/** Most time the final flush may take at shutdown, in ms. */
const FLUSH_BUDGET_MS = 3_000;

let started: Tracing | undefined;

/**
 * Starts tracing for this process. A second call (several services composed in one process by a
 * test) returns the first one's handle: there is one provider per process.
 */
export async function startTracing(opts: { serviceName: string; env?: Env }): Promise<Tracing> {
  if (started) return started;
  const env = opts.env ?? process.env;
  const serviceName = (env['OTEL_SERVICE_NAME'] ?? '').trim() || opts.serviceName;
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  if (!exportConfigured(env)) {
    started = { exporting: false, serviceName, shutdown: () => Promise.resolve() };
    return started;
  }
  const [{ TracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }] = await Promise.all([
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
  ]);
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': serviceName, 'service.instance.id': `${serviceName}-${process.pid}` }),
    spanProcessors: [new BatchSpanProcessor({ exporter: new OTLPTraceExporter(), ...batchOptions(env) })],
  });
  trace.setGlobalTracerProvider(provider);
  spansRecorded();
  let stopping: Promise<void> | undefined;
  started = {
    exporting: true,
    serviceName,
    // Bounded: a collector that does not answer must not eat the process's drain deadline.
    shutdown: () => (stopping ??= Promise.race([provider.shutdown().catch(() => undefined), new Promise<void>((r) => setTimeout(r, FLUSH_BUDGET_MS).unref())])),
  };
  return started;
}
