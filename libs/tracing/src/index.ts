/**
 * @everdict/tracing — OpenTelemetry for the runtime: a W3C traceparent stamped into every
 * envelope and carried through the outbox row, the relay's broker header and the consumer, and
 * spans with safe ids only (SPAN names, SpanAttribute keys). Export by OTLP/HTTP when
 * `OTEL_EXPORTER_OTLP_ENDPOINT` is set; otherwise the API's no-op tracer and no SDK loaded.
 *
 * Depends on the OpenTelemetry API (and, dynamically, its SDK) only — nothing of ours — so the
 * store, the bus and service-kit can all use it.
 */
export { formatTraceparent, isTraceparent, parseTraceparent } from './traceparent.js';
export { SPAN, SpanKind, activeTraceId, captureContext, currentTraceparent, runInContext, traceparentField, withSpan } from './spans.js';
export type { SafeSpan, SpanAttribute, SpanAttributes, SpanName, TraceContext } from './spans.js';
export { exportConfigured, startTracing } from './provider.js';
export type { Tracing } from './provider.js';
