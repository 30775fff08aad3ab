/**
 * Tracing off (no OTEL_EXPORTER_OTLP_ENDPOINT): no SDK module is loaded, every span is the API's
 * non-recording span, and an incoming traceparent still reaches the envelopes stamped under it.
 * Tracing on: the SDK is loaded and spans record. The SDK modules are wrapped so the test sees
 * whether they were imported at all (vi.mock factories run only when a module is imported).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { buildEnvelope, encodeEnvelope, manualClock, newId } from '@everdict/contracts';

const loaded = vi.hoisted(() => new Set<string>());
vi.mock('@opentelemetry/sdk-trace', async (original) => {
  loaded.add('@opentelemetry/sdk-trace');
  return original();
});
vi.mock('@opentelemetry/exporter-trace-otlp-http', async (original) => {
  loaded.add('@opentelemetry/exporter-trace-otlp-http');
  return original();
});

const INCOMING = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const clock = manualClock('2026-12-02T10:00:00.000Z');

/** A fresh copy of the library and of the OpenTelemetry API globals (one provider per process). */
async function freshTracing() {
  vi.resetModules();
  const api = await import('@opentelemetry/api');
  api.trace.disable();
  api.context.disable();
  return import('../src/index.js');
}

/** What a service stamps while handling a delivery: the runtime's draft plus the active trace. */
function stampedUnder(tracing: Awaited<ReturnType<typeof freshTracing>>) {
  const caseId = newId();
  return buildEnvelope(
    {
      type: 'task.runnable',
      version: 1,
      caseId,
      lineage: { rootCaseId: caseId, parentTaskId: null, ancestry: [] },
      sender: { service: 'gate', taskId: null, profile: null, profileVersion: null },
      trust: 'platform',
      payload: { taskId: newId(), reason: 'opened' },
      ...tracing.traceparentField(),
    },
    clock,
  );
}

afterEach(() => loaded.clear());

describe('traceparent values', () => {
  it('parses and formats the version-00 form and refuses everything else', async () => {
    const { formatTraceparent, parseTraceparent } = await freshTracing();
    const sc = parseTraceparent(INCOMING);
    expect(sc).toEqual({ traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: 1, isRemote: true });
    expect(formatTraceparent(sc!)).toBe(INCOMING);
    for (const bad of [undefined, 42, '', '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`, `00-4bf92f3577b34da6a3ce929d0e0e4736-${'0'.repeat(16)}-01`, INCOMING.toUpperCase(), `${INCOMING}-extra`]) {
      expect(parseTraceparent(bad)).toBeUndefined();
    }
  });

  it('decides export from the standard variables only', async () => {
    const { exportConfigured } = await freshTracing();
    expect(exportConfigured({})).toBe(false);
    expect(exportConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(exportConfigured({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true);
    expect(exportConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' })).toBe(false);
    expect(exportConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' })).toBe(false);
  });
});

describe('tracing off', () => {
  it('loads no SDK, records nothing, and passes an incoming traceparent through to stamped envelopes', async () => {
    const tracing = await freshTracing();
    const handle = await tracing.startTracing({ serviceName: 'gate', env: {} });
    expect(handle.exporting).toBe(false);
    expect([...loaded]).toEqual([]);

    // A delivery carrying a traceparent: the consumer's span continues it, the handler stamps.
    const envelope = await tracing.withSpan(tracing.SPAN.consume, { parent: INCOMING, kind: tracing.SpanKind.CONSUMER }, () => stampedUnder(tracing));
    expect(envelope.traceparent).toBe(INCOMING);
    expect(JSON.parse(encodeEnvelope(envelope).toString('utf8')).traceparent).toBe(INCOMING);
    // Nested spans (a turn, a tool call) keep passing it on.
    const nested = await tracing.withSpan(tracing.SPAN.consume, { parent: INCOMING }, () => tracing.withSpan(tracing.SPAN.turn, {}, () => tracing.withSpan(tracing.SPAN.toolCall, {}, () => tracing.currentTraceparent())));
    expect(nested).toBe(INCOMING);
    // A span told to start a new trace (no parent, or an invalid one) does not see the one around it.
    expect(await tracing.withSpan(tracing.SPAN.consume, { parent: INCOMING }, () => tracing.withSpan(tracing.SPAN.publish, { parent: null }, () => tracing.currentTraceparent()))).toBeUndefined();
    expect(await tracing.withSpan(tracing.SPAN.consume, { parent: INCOMING }, () => tracing.withSpan(tracing.SPAN.publish, { parent: 'not-a-traceparent' }, () => tracing.activeTraceId()))).toBeUndefined();
    // A failing body rejects with its own error.
    await expect(tracing.withSpan(tracing.SPAN.turn, {}, () => {
      throw new Error('body failed');
    })).rejects.toThrow('body failed');
    // With no incoming trace there is none to stamp, and none leaks out of a span once it ended.
    expect('traceparent' in (await tracing.withSpan(tracing.SPAN.consume, { parent: null }, () => stampedUnder(tracing)))).toBe(false);
    expect(tracing.currentTraceparent()).toBeUndefined();
    await handle.shutdown();
    expect([...loaded]).toEqual([]);
  });
});

describe('tracing on', () => {
  it('loads the SDK when an OTLP endpoint is set, and spans record under the incoming trace', async () => {
    const tracing = await freshTracing();
    // Nothing listens there; spans are never flushed (the test only looks at the live context).
    const handle = await tracing.startTracing({ serviceName: 'gate', env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', OTEL_BSP_SCHEDULE_DELAY: '60000', OTEL_EXPORTER_OTLP_TIMEOUT: '200' } });
    try {
      expect(handle.exporting).toBe(true);
      expect([...loaded].sort()).toEqual(['@opentelemetry/exporter-trace-otlp-http', '@opentelemetry/sdk-trace']);
      const envelope = await tracing.withSpan(tracing.SPAN.consume, { parent: INCOMING }, () => stampedUnder(tracing));
      const stamped = tracing.parseTraceparent(envelope.traceparent);
      // The same trace, a new span of this process.
      expect(stamped?.traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
      expect(stamped?.spanId).not.toBe('00f067aa0ba902b7');
    } finally {
      await handle.shutdown();
    }
  });
});
