/**
 * Approval binds what runs (seed 004 §5 Binding): the packet's digest covers the connector
 * operation's template hash, and the coordinator rechecks it — and the packet's layout and shape
 * version — at dispatch. A template edited in the fleet config after approval, a packet that pins
 * no template and a packet approved for another shape version are refused before contact: the
 * refusal is ledgered, the task is told, and the target sees nothing.
 *
 * Approvals queue while no coordinator runs; the fleet config is then edited, and only then does a
 * coordinator process start with it.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetConfig } from '@everdict/contracts';
import { COORDINATOR, TOKENS, creditPacket, effectsFixture, type EffectsFixture, type ServiceProc } from './helpers.js';

let f: EffectsFixture;
let node: ServiceProc;

beforeAll(async () => {
  f = await effectsFixture('effects_binding');
  node = await f.start({ services: ['gate', 'reconciler'] });
});
afterAll(async () => {
  await f?.close();
});

async function approve(account: string, edit: (p: ReturnType<typeof creditPacket>) => ReturnType<typeof creditPacket> = (p) => p) {
  const { caseId, taskId } = await f.openCase();
  const { gateId, digest } = await f.propose(caseId, taskId, edit(creditPacket(caseId, { account, amountCents: 42 })));
  await f.waitGate(gateId, 'open');
  const r = await f.decide(node.port, TOKENS.bob, gateId, { decision: 'HW-payment', verdict: 'approve', digest });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return { caseId, taskId, gateId };
}

async function expectRefused(a: { caseId: string; taskId: string; gateId: string }, account: string, reason: string) {
  const d = await f.waitDispatch(a.gateId, ['refused', 'settled']);
  expect(d['state']).toBe('refused');
  expect((d['detail'] as Record<string, unknown>)['refused']).toBe(reason);
  expect(f.target.touching(account)).toHaveLength(0);
  const refused = (await f.ledger(a.caseId)).filter((e) => e.kind === 'effect_refused');
  expect(refused.map((e) => e.body['reason'])).toEqual([reason]);
  const told = (await f.outbox('effect.outcome')).filter((p) => p['taskId'] === a.taskId);
  expect(told).toHaveLength(1);
  expect(told[0]).toMatchObject({ outcome: 'not_applied' });
  expect(await f.store.verifyLedger(a.caseId)).toMatchObject({ ok: true });
}

describe('approval binds what runs', () => {
  it('a template edited after approval, an unpinned packet and another shape version are refused at dispatch; the target sees nothing', async () => {
    const control = await approve('acct-control');
    const unpinned = await approve('acct-unpinned', (p) => ({ ...p, operation: { connector: p.operation.connector, name: p.operation.name } }));
    const reshaped = await approve('acct-reshaped', (p) => ({ ...p, shapeVersion: '2' }));

    // The control runs under the reviewed template.
    let coordinator = await f.start({ services: COORDINATOR });
    await f.waitDispatch(control.gateId, ['settled']);
    expect(f.target.applies.get('acct-control')).toBe(1);
    await expectRefused(unpinned, 'acct-unpinned', 'template_unbound');
    await expectRefused(reshaped, 'acct-reshaped', 'shape_changed');
    await coordinator.kill('SIGTERM');

    // Approved under the reviewed template, while no coordinator runs.
    const edited = await approve('acct-edited');

    // Edit the template: the same operation now sends another body.
    const path = join(f.dir, 'fleet.json');
    const fleet = JSON.parse(readFileSync(path, 'utf8')) as FleetConfig;
    const billing = fleet.connectors!['billing']!;
    if (billing.kind !== 'http') throw new Error('billing is an http connector');
    billing.operations['accounts.credit'] = { ...billing.operations['accounts.credit']!, body: { amountCents: '{{amountCents}}', memo: 'changed after approval' } };
    writeFileSync(path, JSON.stringify(fleet, null, 2));

    coordinator = await f.start({ services: COORDINATOR });
    await expectRefused(edited, 'acct-edited', 'template_changed');
    await coordinator.kill('SIGTERM');
  }, 120_000);
});
