/**
 * W3C Trace Context `traceparent` values (https://www.w3.org/TR/trace-context/#traceparent-header),
 * pure: the one parser and the one formatter the runtime uses for envelopes, outbox rows, broker
 * headers and the rows that hold a trace across a wait (gates, effect dispatches).
 *
 * Invariant: a value is accepted only in version 00 form with a non-zero trace id and span id;
 * anything else is treated as absent (never an error: a bad traceparent must not refuse a message).
 */
import type { SpanContext } from '@opentelemetry/api';

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/** The remote span context a `traceparent` value names, or undefined if it is not a valid one. */
export function parseTraceparent(value: unknown): SpanContext | undefined {
  if (typeof value !== 'string') return undefined;
  const m = TRACEPARENT.exec(value);
  if (!m) return undefined;
  const [, traceId, spanId, flags] = m as unknown as [string, string, string, string];
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
  return { traceId, spanId, traceFlags: parseInt(flags, 16), isRemote: true };
}

/** The `traceparent` value of a span context (version 00). */
export function formatTraceparent(sc: Pick<SpanContext, 'traceId' | 'spanId' | 'traceFlags'>): string {
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/** Whether `value` is a valid traceparent (the form the database CHECK also enforces). */
export function isTraceparent(value: unknown): value is string {
  return parseTraceparent(value) !== undefined;
}
