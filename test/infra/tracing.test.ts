/**
 * Tracing through the broker (issue 14 item 2), in fleet mode: three `everdict start` processes
 * — intake; turn-worker; gate + execution-coordinator + reconciler — on a real Postgres and the
 * shared RabbitMQ, each exporting by OTLP/HTTP to a receiver in this test (a node:http server
 * collecting the exporter's JSON). One case arrives over the API, its scripted agent reads with
 * a tool and proposes a credit, a role holder approves the gate over the gate API, the
 * coordinator credits the real target service and the agent wakes on the outcome and finishes.
 *
 * Asserted on what the processes exported (flushed at SIGTERM: the batch delay is longer than
 * the test, so nothing arrives any other way):
 * - ONE trace id from the case's arrival to the effect's outcome and the turn it woke, with the
 *   expected span names, from three processes (three distinct service.name values);
 * - spans carry safe ids only: nothing of the objective, the title, the prompt or the tool's
 *   arguments appears anywhere in what was exported;
 * - every outbox row of the case carries the trace in its own column and in its envelope;
 * - log lines written inside a span carry its traceId (plus caseId/taskId where they name one).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetConfig } from '@everdict/contracts';
import { TOKENS, agentConnectors, effectsFixture, eventually, fleetConfig, proposeCredit, type EffectsFixture, type ServiceProc } from '../effects/helpers.js';

/** Text only the case's content holds: none of it may reach a span. */
const TITLE = 'Refund for the doubled invoice zebra-quartz';
const OBJECTIVE = 'Customer mango-lantern was charged twice for invoice 7781; credit the difference.';
const PROMPT = 'You act on billing tickets with great care (prompt marker violet-anchor).';
const ACCOUNT = 'acct-trace-1';

interface ExportedSpan {
  readonly service: string;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  readonly attributes: Record<string, unknown>;
}

/** OTLP/JSON ids are hex; a base64 id (protobuf-JSON style) is converted. */
function hexId(id: unknown): string {
  if (typeof id !== 'string' || id === '') return '';
  return /^[0-9a-f]+$/.test(id) ? id : Buffer.from(id, 'base64').toString('hex');
}

function attributeValue(v: Record<string, unknown> | undefined): unknown {
  if (!v) return undefined;
  return v['stringValue'] ?? v['intValue'] ?? v['doubleValue'] ?? v['boolValue'] ?? v;
}

function attributesOf(list: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const a of (list ?? []) as { key: string; value?: Record<string, unknown> }[]) out[a.key] = attributeValue(a.value);
  return out;
}

/** An OTLP/HTTP receiver: keeps every export request's raw body and the spans in it. */
async function otlpReceiver(): Promise<{ url: string; spans: ExportedSpan[]; raw: string[]; close(): Promise<void> }> {
  const spans: ExportedSpan[] = [];
  const raw: string[] = [];
  const read = (req: IncomingMessage) =>
    new Promise<Buffer>((resolve, reject) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => resolve(Buffer.concat(chunks)));
      req.on('error', reject);
    });
  const server: Server = createServer((req, res) => {
    void read(req).then((body) => {
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !String(req.headers['content-type']).includes('application/json')) {
        // The exporter's default encoding is JSON; anything else is a finding, not noise.
        raw.push(`UNEXPECTED ${req.method} ${req.url} ${String(req.headers['content-type'])}`);
        res.writeHead(415).end();
        return;
      }
      const text = body.toString('utf8');
      raw.push(text);
      const doc = JSON.parse(text) as { resourceSpans?: { resource?: { attributes?: unknown }; scopeSpans?: { spans?: Record<string, unknown>[] }[] }[] };
      for (const rs of doc.resourceSpans ?? []) {
        const service = String(attributesOf(rs.resource?.attributes)['service.name']);
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            spans.push({ service, traceId: hexId(s['traceId']), spanId: hexId(s['spanId']), parentSpanId: hexId(s['parentSpanId']), name: String(s['name']), attributes: attributesOf(s['attributes']) });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, spans, raw, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

let f: EffectsFixture;
let receiver: Awaited<ReturnType<typeof otlpReceiver>>;
let intake: ServiceProc;
let worker: ServiceProc;
let effects: ServiceProc;

beforeAll(async () => {
  f = await effectsFixture('tracing');
  receiver = await otlpReceiver();
  const route = (file: string) => ({ adapter: 'scripted' as const, model: 'scripted', scriptPath: file });
  writeFileSync(
    join(f.dir, 'writer.json'),
    JSON.stringify({ steps: [{ toolCalls: [{ name: 'lookup', arguments: { account: ACCOUNT } }] }, { toolCalls: [proposeCredit(ACCOUNT, 500)] }, { text: 'Credited.' }] }),
  );
  writeFileSync(join(f.dir, 'auditor.json'), JSON.stringify({ steps: [{ text: '{"verdict": "approve", "reason": "the amount matches the cited invoice"}' }] }));
  const config: FleetConfig = {
    ...fleetConfig(),
    routes: { writer: route('writer.json'), auditor: route('auditor.json') },
    tools: { lookup: { builtin: 'static', description: 'Look an account up.', output: 'the account is eligible' } },
    profiles: {
      writer: { version: '1', route: 'writer', prompt: PROMPT, tools: ['lookup'], auditor: 'auditor' },
      auditor: { version: '1', route: 'auditor', prompt: 'You audit write packets.' },
    },
    caseTypes: { billing: { rootProfile: 'writer', scope: { reads: 'all', writes: ['writes__propose', 'billing'], forbidden: [] } } },
    connectors: agentConnectors(),
  };
  writeFileSync(join(f.dir, 'traced.json'), JSON.stringify(config, null, 2));
  // The batch delay outlasts the test: spans reach the receiver only by the flush at SIGTERM.
  const otel = { EVERDICT_CONFIG: join(f.dir, 'traced.json'), OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '600000' };
  [intake, worker, effects] = await Promise.all([
    f.start({ services: ['intake'], env: otel }),
    f.start({ services: ['turn-worker'], env: { ...otel, LOG_LEVEL: 'debug' } }),
    f.start({ services: ['gate', 'execution-coordinator', 'reconciler'], env: otel }),
  ]);
});

afterAll(async () => {
  await f?.close();
  await receiver?.close();
});

async function taskState(taskId: string): Promise<{ state: string; park_reason: string | null }> {
  const { rows } = await f.db.query<{ state: string; park_reason: string | null }>({ text: 'SELECT state, park_reason FROM tasks WHERE id = $1::uuid', values: [taskId] });
  return rows[0]!;
}

describe('tracing through the broker (fleet mode, three processes)', () => {
  it('exports one trace from the arrival to the effect outcome, with safe ids only', async () => {
    const opened = await f.post(intake.port, TOKENS.alice, '/v1/cases', { caseType: 'billing', title: TITLE, objective: OBJECTIVE, customer: 'acme' });
    expect(opened.status, JSON.stringify(opened.body)).toBe(201);
    const caseId = String(opened.body['caseId']);
    const taskId = String(opened.body['rootTaskId']);

    const gate = await eventually(
      async () => {
        const { rows } = await f.db.query<{ id: string; packet_digest: string; traceparent: string | null }>({ text: `SELECT id, packet_digest, traceparent FROM gates WHERE case_id = $1::uuid AND state = 'open'`, values: [caseId] });
        return rows[0];
      },
      { timeoutMs: 60_000, what: 'the proposal gate open' },
    );
    await eventually(async () => (await taskState(taskId)).park_reason === 'gate', { timeoutMs: 30_000, what: 'task parked on the gate' });
    const decided = await f.decide(effects.port, TOKENS.bob, gate.id, { decision: 'HW-payment', verdict: 'approve', digest: gate.packet_digest });
    expect(decided.status, JSON.stringify(decided.body)).toBe(201);
    await eventually(async () => (await taskState(taskId)).state === 'done', { timeoutMs: 60_000, what: 'task done after the effect outcome' });
    expect(f.target.requests.filter((r) => r.method === 'POST')).toHaveLength(1);

    // The trace travels with the work: every outbox row of the case names one trace id, in its
    // column and in its envelope, and the gate kept it across the wait for a human.
    const { rows: outbox } = await f.db.query<{ type: string; traceparent: string | null; body: Buffer }>({ text: 'SELECT type, traceparent, body FROM outbox_messages WHERE case_id = $1::uuid ORDER BY seq', values: [caseId] });
    expect(outbox.map((r) => r.type)).toEqual(expect.arrayContaining(['task.runnable', 'gate.requested', 'gate.decided', 'effect.outcome']));
    const traceOf = (tp: string | null | undefined) => tp?.split('-')[1];
    const traceId = traceOf(outbox[0]!.traceparent);
    expect(traceId).toMatch(/^[0-9a-f]{32}$/);
    for (const row of outbox) {
      expect(traceOf(row.traceparent), row.type).toBe(traceId);
      expect((JSON.parse(row.body.toString('utf8')) as { traceparent?: string }).traceparent, row.type).toBe(row.traceparent);
    }
    expect(traceOf(gate.traceparent)).toBe(traceId);

    // SIGTERM flushes each process's spans (the batch delay never elapses in this test).
    for (const p of [intake, worker, effects]) expect((await p.kill('SIGTERM')).code, p.output().slice(-2000)).toBe(0);
    expect(receiver.raw.filter((r) => r.startsWith('UNEXPECTED'))).toEqual([]);

    const inTrace = receiver.spans.filter((s) => s.traceId === traceId);
    const names = new Set(inTrace.map((s) => s.name));
    for (const name of ['case.arrival', 'outbox.publish', 'message.consume', 'turn', 'model.call', 'tool.call', 'gate.wait', 'effect.dispatch', 'effect.outcome']) expect(names, name).toContain(name);
    const services = new Set(inTrace.map((s) => s.service));
    expect([...services].sort()).toEqual(['gate+execution-coordinator+reconciler', 'intake', 'turn-worker']);

    // From the arrival to the effect's outcome and the turn it woke: all in this one trace.
    const arrival = receiver.spans.filter((s) => s.name === 'case.arrival' && s.attributes['case.id'] === caseId);
    expect(arrival.map((s) => [s.traceId, s.service, s.parentSpanId])).toEqual([[traceId, 'intake', '']]);
    const outcome = inTrace.find((s) => s.name === 'effect.outcome' && s.attributes['case.id'] === caseId);
    expect(outcome?.service).toBe('gate+execution-coordinator+reconciler');
    expect(inTrace.some((s) => s.name === 'message.consume' && s.attributes['message.type'] === 'effect.outcome' && s.service === 'turn-worker')).toBe(true);
    const mainPath = receiver.spans.filter((s) => ['case.arrival', 'turn', 'model.call', 'tool.call', 'gate.wait', 'effect.dispatch', 'effect.outcome'].includes(s.name) && (s.attributes['case.id'] === caseId || s.attributes['task.id'] === taskId));
    expect(new Set(mainPath.map((s) => s.traceId))).toEqual(new Set([traceId]));
    // Every span in the trace hangs off another span of it, except the arrival (the root).
    const ids = new Set(inTrace.map((s) => s.spanId));
    expect(inTrace.filter((s) => !ids.has(s.parentSpanId)).map((s) => s.name)).toEqual(['case.arrival']);
    expect(inTrace.find((s) => s.name === 'tool.call' && s.attributes['tool.name'] === 'lookup')?.attributes).toMatchObject({ 'case.id': caseId, 'task.id': taskId });
    expect(inTrace.find((s) => s.name === 'gate.wait')?.attributes).toMatchObject({ 'gate.id': gate.id, outcome: 'approved' });

    // Safe ids only: nothing of the case's content, the prompt or the tool's arguments was exported.
    const exported = receiver.raw.join('\n');
    for (const secret of ['zebra-quartz', 'mango-lantern', 'invoice 7781', 'violet-anchor', ACCOUNT, 'credit 500 cents']) expect(exported, secret).not.toContain(secret);
    for (const s of receiver.spans) for (const v of Object.values(s.attributes)) expect(typeof v === 'string' ? v.length : 0, `${s.name} attribute`).toBeLessThanOrEqual(64);

    // Logs join traces: the tool's debug lines name the trace, the case and the task.
    const toolLines = worker
      .output()
      .split('\n')
      .filter((l) => l.includes('"tool started"'))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(toolLines.length).toBeGreaterThan(0);
    for (const l of toolLines) expect(l).toMatchObject({ traceId, caseId, taskId });
  });
});
