/**
 * Spans and the active trace, on the OpenTelemetry API only (the SDK is loaded by provider.ts,
 * and only when export is configured). With no provider every span is the API's non-recording
 * span; one started under a remote parent carries that parent's context, so `currentTraceparent`
 * still passes an incoming trace through to the envelopes stamped under it.
 *
 * Safe ids only: attributes are typed by SPAN_ATTRIBUTE keys (ids, names of routes and tools,
 * message types, outcome classes). There is no way to attach free text — never a prompt, an
 * objective, tool arguments or results. A failure records its error code or class, never its
 * message (which may quote content).
 */
import { INVALID_SPAN_CONTEXT, ROOT_CONTEXT, SpanKind, SpanStatusCode, context, isSpanContextValid, trace } from '@opentelemetry/api';
import type { Context, Span } from '@opentelemetry/api';
import { formatTraceparent, parseTraceparent } from './traceparent.js';

export { SpanKind };
export type TraceContext = Context;

/** The span names the runtime emits (one vocabulary for the code, the README and the tests). */
export const SPAN = {
  /** intake: a case arrives (opened, or matched to an existing one). */
  arrival: 'case.arrival',
  /** relay: one outbox row published to the broker. */
  publish: 'outbox.publish',
  /** consumer: one delivery through the inbox pipeline. */
  consume: 'message.consume',
  /** turn-worker: one durable turn. */
  turn: 'turn',
  /** turn-worker: one model call through its route. */
  modelCall: 'model.call',
  /** turn-worker: one tool invocation. */
  toolCall: 'tool.call',
  /** gate: from the gate request to the decision that closed the gate. */
  gateWait: 'gate.wait',
  /** coordinator: the §5 dispatch sequence of one approved grant. */
  effectDispatch: 'effect.dispatch',
  /** coordinator: the recorded outcome of a dispatched effect and its `effect.outcome` message. */
  effectOutcome: 'effect.outcome',
  /** reconciler: one WhatLanded check of an effect whose outcome is unknown. */
  effectReconcile: 'effect.reconcile',
} as const;
export type SpanName = (typeof SPAN)[keyof typeof SPAN];

/** The only attribute keys a span may carry: ids and bounded names, never content. */
export type SpanAttribute =
  | 'case.id'
  | 'task.id'
  | 'call.id'
  | 'gate.id'
  | 'grant.id'
  | 'message.id'
  | 'message.type'
  | 'consumer'
  | 'source'
  | 'route'
  | 'tool.name'
  | 'turn'
  | 'operation'
  | 'decision'
  | 'outcome'
  | 'error.type';
export type SpanAttributes = Partial<Record<SpanAttribute, string | number | boolean | null | undefined>>;

/** What a span body may do to its span: add safe attributes. */
export interface SafeSpan {
  set(attributes: SpanAttributes): void;
}

interface SpanOptions {
  readonly attributes?: SpanAttributes;
  /**
   * The parent as a traceparent value (from an envelope, an outbox row, a gate or dispatch row).
   * Undefined: the active context. A value that is not a valid traceparent counts as none, and
   * the span starts a new trace.
   */
  readonly parent?: string | null;
  readonly kind?: SpanKind;
  /** When the span began, if before now (a wait recorded at its end). */
  readonly startTime?: Date;
}

const tracer = () => trace.getTracer('everdict');

/**
 * Whether a tracer provider records spans in this process (set by provider.ts when it installs
 * one). Without one every span is the API's non-recording span, and a span whose parent carries
 * no valid trace would carry none either: withSpan then skips it (see there).
 */
let recording = false;
export function spansRecorded(): void {
  recording = true;
}

const UNRECORDED: SafeSpan = { set: () => {} };

function clean(attributes: SpanAttributes | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const [k, v] of Object.entries(attributes ?? {})) if (v !== null && v !== undefined) out[k] = v;
  return out;
}

/** The context a span with this parent option starts in. */
function parentContext(parent: string | null | undefined): Context {
  if (parent === undefined) return context.active();
  const sc = parseTraceparent(parent);
  return sc ? trace.setSpanContext(ROOT_CONTEXT, sc) : ROOT_CONTEXT;
}

function errorType(err: unknown): string {
  if (typeof err === 'object' && err !== null) {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && code.length <= 64) return code;
    const name = (err as { name?: unknown }).name;
    if (typeof name === 'string' && name.length <= 64) return name;
  }
  return typeof err;
}

/**
 * Runs `fn` inside a new span (active for everything `fn` awaits), ends it when `fn` settles, and
 * returns what `fn` returns. A throw marks the span failed with the error's code or class and is
 * rethrown unchanged.
 */
export async function withSpan<T>(name: SpanName, opts: SpanOptions, fn: (span: SafeSpan) => Promise<T> | T): Promise<T> {
  const parent = parentContext(opts.parent);
  // Nothing records and the parent carries no trace: the span would be an invalid non-recording
  // one, which makes no trace active. `fn` runs in the parent context as it is (no span object,
  // no attribute copy, no context frame: measured, a turn's three spans were ~2 % of a
  // turn-worker's allocations with tracing off); what it reads of the trace is the same.
  if (!recording && !isSpanContextValid(trace.getSpanContext(parent) ?? INVALID_SPAN_CONTEXT)) {
    return parent === context.active() ? fn(UNRECORDED) : context.with(parent, () => fn(UNRECORDED));
  }
  const span: Span = tracer().startSpan(
    name,
    { kind: opts.kind ?? SpanKind.INTERNAL, attributes: clean(opts.attributes), ...(opts.startTime ? { startTime: opts.startTime } : {}) },
    parent,
  );
  const safe: SafeSpan = { set: (a) => void span.setAttributes(clean(a)) };
  try {
    return await context.with(trace.setSpan(parent, span), () => fn(safe));
  } catch (err) {
    span.setAttribute('error.type', errorType(err));
    span.setStatus({ code: SpanStatusCode.ERROR });
    throw err;
  } finally {
    span.end();
  }
}

/** The active span's traceparent (to stamp into an envelope), or undefined when no trace is active. */
export function currentTraceparent(): string | undefined {
  const sc = trace.getSpanContext(context.active());
  return sc && isSpanContextValid(sc) ? formatTraceparent(sc) : undefined;
}

/**
 * The active trace as an envelope draft field, for every stamper (`{}` when no trace is active):
 * the runtime stamps it; the model never supplies it.
 */
export function traceparentField(): { traceparent?: string } {
  const traceparent = currentTraceparent();
  return traceparent === undefined ? {} : { traceparent };
}

/** The active trace id (for log lines), or undefined. */
export function activeTraceId(): string | undefined {
  const sc = trace.getSpanContext(context.active());
  return sc && isSpanContextValid(sc) ? sc.traceId : undefined;
}

/** The active context, to resume later in work that is not awaited from here (a queued activation). */
export function captureContext(): TraceContext {
  return context.active();
}

/** Runs `fn` in a captured context (undefined: the active one). */
export function runInContext<T>(ctx: TraceContext | undefined, fn: () => T): T {
  return ctx === undefined ? fn() : context.with(ctx, fn);
}
