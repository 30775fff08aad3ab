/**
 * Session control on the gate service's routes that act on a case (seed 004 §11.1, issue 13
 * item 2), on a real node (gate, coordinator, reconciler and intake in one `everdict start`):
 *
 * - Once the operator olga has taken the case's session over (intake's takeover route), bob —
 *   who holds the deciding role but not `operator` — is refused a verdict on the case's gate:
 *   403 `not_controller` naming olga, and nothing is recorded (the gate stays open, no decision
 *   row, no ledger record). On a case nobody operates, bob's verdict is accepted.
 * - `POST /v1/effects/:callId/outcome` for a call in doubt: alice, who may record it (she holds
 *   the deciding role) but does not control the case, gets 403 `not_controller`; nothing is
 *   recorded and the call stays unknown. The controller olga records it.
 *
 * The call in doubt is made real: a target without receipts applies the write and drops the
 * connection before answering.
 */
import http from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EffectPacket, FleetConfig } from '@everdict/contracts';
import { declaredTemplateHash } from '@everdict/connectors';
import { TOKENS, creditPacket, effectsFixture, eventually, type EffectsFixture, type ServiceProc } from './helpers.js';

const SWITCH_ENV = 'EFFECTS_SWITCH_URL';

/** A switch service with no receipts: every PUT is applied, then the connection is dropped. */
function switchServer(): { start(): Promise<string>; stop(): Promise<void>; puts: () => number } {
  let puts = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.method === 'PUT') {
        puts++;
        return void req.socket.destroy();
      }
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"no_route"}');
    });
  });
  return {
    start: async () => {
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`;
    },
    stop: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
    puts: () => puts,
  };
}

function switchConnector(): NonNullable<FleetConfig['connectors']> {
  return {
    switches: {
      kind: 'http',
      target: { system: 'switches', environment: 'test' },
      baseUrlEnv: SWITCH_ENV,
      timeoutMs: 3000,
      operations: {
        'switch.set': {
          access: 'write',
          effectClass: 'payment',
          method: 'PUT',
          path: '/switches/{id}',
          body: { on: '{{on}}' },
          params: { id: { type: 'string', maxLength: 32, pattern: '[a-z0-9-]+' }, on: { type: 'string', maxLength: 8 } },
          impactKeys: ['switches:{id}'],
        },
      },
    },
  };
}

function switchPacket(caseId: string, id: string): EffectPacket {
  return {
    packetVersion: 1,
    caseId,
    planStepId: `switch-${id}`,
    planRevision: 1,
    shapeVersion: '1',
    operation: { connector: 'switches', name: 'switch.set', templateHash: declaredTemplateHash('switches', switchConnector()['switches']!, 'switch.set')! },
    effectClass: 'payment',
    target: { connector: 'switches', system: 'switches', environment: 'test' },
    params: { id, on: 'yes' },
    expectedCounts: {},
    preconditions: [],
    assertions: [],
    revert: { kind: 'manual', description: 'switch it back by hand' },
    impactKeys: [`switches:${id}`],
    summary: `switch ${id} on`,
  };
}

let f: EffectsFixture;
let node: ServiceProc;
const target = switchServer();

beforeAll(async () => {
  f = await effectsFixture('effects_session_control');
  const url = await target.start();
  const path = join(f.dir, 'fleet.json');
  const fleet = JSON.parse(readFileSync(path, 'utf8')) as FleetConfig;
  fleet.connectors = { ...fleet.connectors, ...switchConnector() };
  fleet.caseTypes['t']!.scope.writes = [...fleet.caseTypes['t']!.scope.writes, 'switches'];
  writeFileSync(path, JSON.stringify(fleet, null, 2));
  node = await f.start({ services: ['gate', 'execution-coordinator', 'reconciler', 'intake'], env: { [SWITCH_ENV]: url } });
}, 120_000);
afterAll(async () => {
  await f?.close();
  await target.stop();
});

/** olga takes the case's session over through intake's route. */
async function olgaTakesOver(caseId: string): Promise<void> {
  const r = await f.post(node.port, TOKENS.olga, `/v1/cases/${caseId}/session/takeover`, { reason: 'I operate this case now' });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  expect(r.body).toMatchObject({ session: { controller: 'olga' } });
}

describe('session control on the gate routes', () => {
  it('refuses a verdict from a non-controller without the operator role, and records nothing', async () => {
    const { caseId, taskId } = await f.openCase();
    const { gateId, digest } = await f.propose(caseId, taskId, creditPacket(caseId, { account: 'ctl-1', amountCents: 100 }));
    await f.waitGate(gateId, 'open');
    await olgaTakesOver(caseId);
    const ledgerBefore = (await f.ledger(caseId)).length;

    const refused = await f.decide(node.port, TOKENS.bob, gateId, { decision: 'HW-payment', verdict: 'approve', digest });
    expect(refused.status, JSON.stringify(refused.body)).toBe(403);
    expect(refused.body).toMatchObject({ error: 'not_controller' });
    expect(String(refused.body['message'])).toContain('olga');
    expect((await f.waitGate(gateId))['state']).toBe('open');
    expect((await f.db.query({ text: 'SELECT 1 FROM decisions WHERE gate_id = $1::uuid', values: [gateId] })).rows).toHaveLength(0);
    expect((await f.ledger(caseId)).length).toBe(ledgerBefore);

    // A case nobody operates takes bob's verdict.
    const other = await f.openCase();
    const g2 = await f.propose(other.caseId, other.taskId, creditPacket(other.caseId, { account: 'ctl-2', amountCents: 100 }));
    await f.waitGate(g2.gateId, 'open');
    expect((await f.decide(node.port, TOKENS.bob, g2.gateId, { decision: 'HW-payment', verdict: 'approve', digest: g2.digest })).status).toBe(201);
  }, 90_000);

  it('refuses an outcome from a non-controller without the operator role; the controller records it', async () => {
    const { caseId, taskId } = await f.openCase();
    const { gateId, digest } = await f.propose(caseId, taskId, switchPacket(caseId, 'sw-1'));
    await f.waitGate(gateId, 'open');
    expect((await f.decide(node.port, TOKENS.bob, gateId, { decision: 'HW-payment', verdict: 'approve', digest })).status).toBe(201);
    const unknown = await eventually(async () => (await f.outbox('effect.outcome')).find((p) => p['taskId'] === taskId && p['outcome'] === 'unknown'), { timeoutMs: 30_000, what: 'the call in doubt' });
    const path = `/v1/effects/${String(unknown['callId'])}/outcome`;
    expect(target.puts()).toBe(1);
    await olgaTakesOver(caseId);

    const refused = await f.post(node.port, TOKENS.alice, path, { outcome: 'applied', evidence: 'I looked at the switch' });
    expect(refused.status, JSON.stringify(refused.body)).toBe(403);
    expect(refused.body).toMatchObject({ error: 'not_controller', controller: 'olga' });
    expect((await f.ledger(caseId)).filter((e) => e.kind === 'effect_outcome_recorded')).toHaveLength(0);

    const recorded = await f.post(node.port, TOKENS.olga, path, { outcome: 'applied', evidence: 'the switch reads on' });
    expect(recorded.status, JSON.stringify(recorded.body)).toBe(201);
    expect(recorded.body).toMatchObject({ conclusive: true, recordedBy: 'olga' });
    expect(await f.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  }, 90_000);
});
