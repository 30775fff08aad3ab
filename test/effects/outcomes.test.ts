/**
 * A human path for unknown outcomes (seed 004 §7, issue 13 item 7), against a REAL target that
 * has NO receipts endpoint: a flag service (PUT sets a value, GET reads it) that can apply a write
 * and then drop the connection, so the coordinator's answer is `unknown`.
 *
 * - Declared post-state read (`flags`): WhatLanded reads the flag, sees exactly the written value
 *   and settles `applied` on its own — keys released, the task told.
 * - Neither receipts nor post-state (`plain`): the call stays unknown, keys held, until an
 *   operator records the outcome. `partly_applied` keeps the keys held and the target is no
 *   longer asked; `applied` settles through the same path (keys released, task told), ledgered
 *   with the principal. No role → 403; a call not in doubt → 409.
 */
import { execFile } from 'node:child_process';
import http from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EffectPacket, FleetConfig } from '@everdict/contracts';
import { declaredTemplateHash } from '@everdict/connectors';
import { REPO, TOKENS, effectsFixture, eventually, type EffectsFixture, type ServiceProc } from './helpers.js';

/** A flag store with no receipts: the only record of a write is the state it leaves. */
class FlagService {
  readonly flags = new Map<string, string>();
  readonly puts = new Map<string, number>();
  readonly gets = new Map<string, number>();
  readonly dropAfterApply = new Set<string>();
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const m = /^\/api\/flags\/([^/]+)$/.exec(req.url ?? '');
      const send = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (!m) return send(404, { error: 'no_route' });
      const id = decodeURIComponent(m[1]!);
      if (req.method === 'GET') {
        this.gets.set(id, (this.gets.get(id) ?? 0) + 1);
        const value = this.flags.get(id);
        return value === undefined ? send(404, { error: 'no_such_flag' }) : send(200, { id, value });
      }
      if (req.method === 'PUT') {
        const { value } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { value: string };
        this.flags.set(id, value);
        this.puts.set(id, (this.puts.get(id) ?? 0) + 1);
        if (this.dropAfterApply.delete(id)) return void req.socket.destroy();
        return send(200, { id, value });
      }
      send(405, { error: 'method' });
    });
  });
  port = 0;
  async start() {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as AddressInfo).port;
  }
  async stop() {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const FLAGS_ENV = 'EFFECTS_FLAGS_URL';

/** Two connectors on the same flag service, neither with receipts; only `flags` declares a post-state read. */
function flagConnectors(): NonNullable<FleetConfig['connectors']> {
  const operations = (postState: boolean) => ({
    'flags.set': {
      access: 'write' as const,
      effectClass: 'payment',
      method: 'PUT' as const,
      path: '/flags/{flagId}',
      body: { value: '{{value}}' },
      params: { flagId: { type: 'string' as const, maxLength: 64, pattern: '[a-z0-9-]+' }, value: { type: 'string' as const, maxLength: 64 } },
      impactKeys: ['flags:{flagId}'],
      ...(postState ? { postState: { read: 'flags.get', params: { flagId: '{{flagId}}' }, pointer: '/body/value', equals: '{{value}}' } } : {}),
    },
    'flags.get': { access: 'read' as const, method: 'GET' as const, path: '/flags/{flagId}', params: { flagId: { type: 'string' as const, maxLength: 64 } } },
  });
  return {
    flags: { kind: 'http', target: { system: 'flags', environment: 'test' }, baseUrlEnv: FLAGS_ENV, timeoutMs: 3000, operations: operations(true) },
    plain: { kind: 'http', target: { system: 'flags', environment: 'test' }, baseUrlEnv: FLAGS_ENV, timeoutMs: 3000, operations: operations(false) },
  };
}

function flagPacket(caseId: string, connector: 'flags' | 'plain', flagId: string, value: string): EffectPacket {
  const templateHash = declaredTemplateHash(connector, flagConnectors()[connector]!, 'flags.set')!;
  return {
    packetVersion: 1,
    caseId,
    planStepId: `set-${flagId}`,
    planRevision: 1,
    shapeVersion: '1',
    operation: { connector, name: 'flags.set', templateHash },
    effectClass: 'payment',
    target: { connector, system: 'flags', environment: 'test' },
    params: { flagId, value },
    expectedCounts: {},
    preconditions: [],
    assertions: [],
    revert: { kind: 'manual', description: 'set the flag back by hand' },
    impactKeys: [`flags:${flagId}`],
    summary: `set ${flagId}`,
  };
}

let f: EffectsFixture;
let node: ServiceProc;
const target = new FlagService();

beforeAll(async () => {
  f = await effectsFixture('effects_outcomes');
  await target.start();
  const path = join(f.dir, 'fleet.json');
  const fleet = JSON.parse(readFileSync(path, 'utf8')) as FleetConfig;
  fleet.connectors = { ...fleet.connectors, ...flagConnectors() };
  fleet.caseTypes['t']!.scope.writes = [...fleet.caseTypes['t']!.scope.writes, 'flags', 'plain'];
  writeFileSync(path, JSON.stringify(fleet, null, 2));
  node = await f.start({ env: { [FLAGS_ENV]: `http://127.0.0.1:${target.port}/api` } });
});
afterAll(async () => {
  await f?.close();
  await target.stop();
});

/** Proposes, approves, and waits until the dropped response made the call unknown. */
async function unknownCall(connector: 'flags' | 'plain', flagId: string, value: string) {
  const { caseId, taskId } = await f.openCase();
  target.dropAfterApply.add(flagId);
  const { gateId, digest } = await f.propose(caseId, taskId, flagPacket(caseId, connector, flagId, value));
  await f.waitGate(gateId, 'open');
  expect((await f.decide(node.port, TOKENS.bob, gateId, { decision: 'HW-payment', verdict: 'approve', digest })).status).toBe(201);
  const unknown = await eventually(async () => (await f.outbox('effect.outcome')).find((p) => p['taskId'] === taskId && p['outcome'] === 'unknown'), { timeoutMs: 30_000, what: `unknown outcome of ${flagId}` });
  return { caseId, taskId, gateId, callId: String(unknown['callId']) };
}

async function claims(callId: string): Promise<string[]> {
  const { rows } = await f.db.query<{ impact_key: string }>({ text: 'SELECT impact_key FROM impact_claims WHERE call_id = $1::uuid', values: [callId] });
  return rows.map((r) => r.impact_key);
}

/** `everdict …` as the operator olga against the node's gate API. */
function everdict(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      ['--conditions=source', '--import', 'tsx', 'cli/src/main.ts', ...args],
      { cwd: REPO, env: { ...process.env, EVERDICT_URL: `http://127.0.0.1:${node.port}`, EVERDICT_GATE_URL: `http://127.0.0.1:${node.port}`, EVERDICT_TOKEN: TOKENS.olga }, timeout: 60_000 },
      (err, stdout, stderr) => done({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const settledOutcomes = async (taskId: string) => (await f.outbox('effect.outcome')).filter((p) => p['taskId'] === taskId && p['outcome'] !== 'unknown');

describe('unknown outcomes on a target without receipts', () => {
  it('a declared post-state read reconciles a dropped response to applied on its own', async () => {
    const c = await unknownCall('flags', 'flag-post', 'on');
    const d = await f.waitDispatch(c.gateId, ['settled']);
    expect((d['detail'] as Record<string, unknown>)['outcome']).toBe('applied');
    expect(target.puts.get('flag-post')).toBe(1);
    expect(target.gets.get('flag-post') ?? 0).toBeGreaterThanOrEqual(1);
    expect(await claims(c.callId)).toEqual([]);
    expect((await settledOutcomes(c.taskId)).map((p) => p['outcome'])).toEqual(['applied']);
    const checks = (await f.ledger(c.caseId)).filter((e) => e.kind === 'effect_whatlanded');
    expect(checks.at(-1)!.body).toMatchObject({ outcome: 'applied', receipt: { postState: { read: 'flags.get', pointer: '/body/value', observed: 'on' } } });
    expect(await f.store.verifyLedger(c.caseId)).toMatchObject({ ok: true });
  }, 90_000);

  it('without receipts or post-state the call stays unknown until an operator records it; only a conclusive outcome releases the keys and wakes the task', async () => {
    const c = await unknownCall('plain', 'flag-plain', 'on');
    const path = `/v1/effects/${c.callId}/outcome`;
    // Reconciliation keeps asking and keeps getting "unknown": nothing can prove what landed.
    await eventually(async () => (await f.ledger(c.caseId)).filter((e) => e.kind === 'effect_whatlanded' && e.body['reason'] === 'no_receipts_endpoint').length >= 2, { timeoutMs: 20_000, what: 'two inconclusive checks' });
    expect((await f.dispatchOf(c.gateId))!['state']).toBe('reconciling');
    expect(await claims(c.callId)).toEqual(['flags:flag-plain']);
    expect(await settledOutcomes(c.taskId)).toEqual([]);

    // A principal without the operator role or a deciding role may not; a malformed body names its field.
    expect((await f.post(node.port, TOKENS.mallory, path, { outcome: 'applied', evidence: 'trust me' })).status).toBe(403);
    expect((await f.post(node.port, TOKENS.olga, path, { outcome: 'landed', evidence: 'x' })).body).toMatchObject({ error: 'invalid_body', field: 'outcome' });
    expect((await f.post(node.port, TOKENS.olga, path, { outcome: 'applied', evidence: '' })).body).toMatchObject({ field: 'evidence' });

    // Partly applied: ledgered with the principal, keys stay held, the target is no longer asked.
    const partly = await f.post(node.port, TOKENS.olga, path, { outcome: 'partly_applied', evidence: 'flag set on one replica only' });
    expect(partly.status, JSON.stringify(partly.body)).toBe(201);
    expect(partly.body).toMatchObject({ conclusive: false, recordedBy: 'olga' });
    const asked = (await f.ledger(c.caseId)).filter((e) => e.kind === 'effect_whatlanded').length;
    await new Promise((r) => setTimeout(r, 2_500));
    expect((await f.ledger(c.caseId)).filter((e) => e.kind === 'effect_whatlanded').length).toBe(asked);
    expect(await claims(c.callId)).toEqual(['flags:flag-plain']);
    expect((await f.dispatchOf(c.gateId))!['state']).toBe('reconciling');
    expect(await settledOutcomes(c.taskId)).toEqual([]);

    // Applied, by the CLI: the same settle path as WhatLanded — keys released, grant spent, task told.
    expect((await everdict('outcome', c.callId, '--applied')).code).toBe(2);
    const applied = await everdict('outcome', c.callId, '--applied', '--evidence', 'checked all replicas: flag is on', '--json');
    expect(applied.code, applied.stderr).toBe(0);
    expect(JSON.parse(applied.stdout)).toMatchObject({ conclusive: true, outcome: 'applied', recordedBy: 'olga' });
    const d = await f.waitDispatch(c.gateId, ['settled']);
    expect((d['detail'] as Record<string, unknown>)['outcome']).toBe('applied');
    expect(await claims(c.callId)).toEqual([]);
    expect((await settledOutcomes(c.taskId)).map((p) => p['outcome'])).toEqual(['applied']);
    expect(target.puts.get('flag-plain')).toBe(1);

    const recorded = (await f.ledger(c.caseId)).filter((e) => e.kind === 'effect_outcome_recorded');
    expect(recorded.map((e) => [e.body['outcome'], e.body['principal'], e.body['conclusive']])).toEqual([
      ['partly_applied', 'olga', false],
      ['applied', 'olga', true],
    ]);
    // Settled: nothing more to record.
    expect((await f.post(node.port, TOKENS.olga, path, { outcome: 'not_applied', evidence: 'again' })).status).toBe(409);
    expect(await f.store.verifyLedger(c.caseId)).toMatchObject({ ok: true });
  }, 120_000);
});
