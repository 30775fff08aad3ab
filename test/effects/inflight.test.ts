/**
 * Effects in flight (issue 5 acceptance), against real services (gate + coordinator + reconciler
 * composed on one child process), a real target HTTP service and real Postgres/RabbitMQ:
 * - the target applies and drops the connection: unknown → the reconciler establishes `applied`
 *   from the receipt, and there is no second apply;
 * - hard stop mid-case refuses new effects while an unknown outcome still reconciles;
 * - two cases whose packets share an impact key: one proceeds, the other parks for coordination
 *   (and proceeds once the key is released);
 * - the same packet re-proposed under a new tool-call id: one operation, the same receipt;
 * - every connector result has its ledger row, and every ledger verifies.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packetMutationKey } from '@everdict/contracts';
import { effectIdempotencyKey, lookupMutation, setCaseStop } from '@everdict/store';
import { TOKENS, creditPacket, effectsFixture, eventually, type EffectsFixture, type ServiceProc } from './helpers.js';

let f: EffectsFixture;
let node: ServiceProc;
const cases: string[] = [];

beforeAll(async () => {
  f = await effectsFixture('effects_inflight');
  node = await f.start({});
});
afterAll(async () => {
  await f?.close();
});

async function approved(caseId: string, taskId: string, packet: ReturnType<typeof creditPacket>, o: { callId?: string } = {}) {
  const { gateId, digest } = await f.propose(caseId, taskId, packet, o);
  await f.waitGate(gateId, 'open');
  const r = await f.decide(node.port, TOKENS.bob, gateId, { decision: 'HW-payment', verdict: 'approve', digest });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  expect(r.body).toMatchObject({ gateState: 'approved' });
  return { gateId, digest, grantId: String(r.body['grantId']) };
}

async function callOf(gateId: string) {
  const d = await f.dispatchOf(gateId);
  const { rows } = await f.db.query<Record<string, unknown>>({ text: 'SELECT * FROM runtime_calls WHERE id = $1::uuid', values: [d?.['call_id']] });
  return rows[0]!;
}

const kinds = async (caseId: string) => (await f.ledger(caseId)).map((e) => e.kind);

describe('effects in flight', () => {
  it('target applies and drops the connection: unknown, then applied from the receipt, never applied twice', async () => {
    const { caseId, taskId } = await f.openCase();
    cases.push(caseId);
    f.target.dropAfterApply.add('acct-drop');
    const packet = creditPacket(caseId, { account: 'acct-drop', amountCents: 700 });
    const { gateId } = await approved(caseId, taskId, packet);

    const d = await f.waitDispatch(gateId, ['settled']);
    expect(d['attempt']).toBe(1);
    const call = await callOf(gateId);
    expect(call).toMatchObject({ kind: 'effect', status: 'completed', outcome_class: 'applied', effect_attempt: 1, logical_key: packetMutationKey(packet) });

    // One credit request, one apply, and the reconciler's lookup for exactly that key.
    expect(f.target.mutations('acct-drop')).toHaveLength(1);
    expect(f.target.applies.get('acct-drop')).toBe(1);
    const key = effectIdempotencyKey(packetMutationKey(packet), 1);
    const lookups = f.target.requests.filter((r) => r.url === `/api/receipts/${key}`);
    expect(lookups.length).toBeGreaterThanOrEqual(1);

    const ledger = await f.ledger(caseId);
    const results = ledger.filter((e) => e.kind === 'effect_result');
    expect(results.map((e) => e.body['outcome'])).toEqual(['unknown']);
    expect(results[0]!.body['reason']).toBe('connection_lost');
    const landed = ledger.filter((e) => e.kind === 'effect_whatlanded');
    expect(landed.length).toBe(lookups.length); // every lookup result has its ledger row
    expect(landed.at(-1)!.body).toMatchObject({ outcome: 'applied' });
    expect(String(landed.at(-1)!.body['established'])).toMatch(/receipt/);

    // The agent heard "unknown" first, then the established outcome with the target's receipt.
    const outcomes = (await f.outbox('effect.outcome')).filter((p) => p['callId'] === call['id']);
    expect(outcomes.map((o) => o['outcome'])).toEqual(['unknown', 'applied']);
    expect(outcomes[1]!['receipt']).toMatchObject({ body: { accountId: 'acct-drop', amountCents: 700 } });
    expect(await f.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });

  it('hard stop mid-case refuses a new effect before contact while an unknown outcome still reconciles', async () => {
    const { caseId, taskId } = await f.openCase();
    cases.push(caseId);
    f.target.receiptsDown = true;
    f.target.dropAfterApply.add('acct-hs-1');
    const first = await approved(caseId, taskId, creditPacket(caseId, { account: 'acct-hs-1', amountCents: 100 }));
    await f.waitDispatch(first.gateId, ['reconciling']);
    // Lookups answer 503: the outcome stays unknown, counted, never retried blind.
    await eventually(async () => (await f.ledger(caseId)).filter((e) => e.kind === 'effect_whatlanded').length >= 2, { what: 'inconclusive lookups' });
    expect(f.target.mutations('acct-hs-1')).toHaveLength(1);
    const metrics = await (await fetch(`http://127.0.0.1:${node.port}/metrics`)).text();
    expect(metrics).toMatch(/everdict_effect_unknown_outcomes\{[^}]*\} [1-9]/);

    expect(await setCaseStop(f.db, caseId, 'hard')).toBe(true);
    const second = await approved(caseId, taskId, creditPacket(caseId, { account: 'acct-hs-2', amountCents: 200 }));
    const refused = await f.waitDispatch(second.gateId, ['refused']);
    expect(refused['detail']).toMatchObject({ refused: 'hard_stop' });
    expect(f.target.touching('acct-hs-2')).toHaveLength(0);
    const refusal = (await f.outbox('effect.outcome')).find((p) => p['grantId'] === second.grantId);
    expect(refusal).toMatchObject({ outcome: 'not_applied' });
    expect(String(refusal!['established'])).toMatch(/refused before contact.*hard stop/);

    // Reconciliation is not a new effect: it runs under hard stop and settles the first one.
    f.target.receiptsDown = false;
    await f.waitDispatch(first.gateId, ['settled']);
    expect((await callOf(first.gateId))['status']).toBe('completed');
    expect(f.target.applies.get('acct-hs-1')).toBe(1);
    expect(f.target.mutations('acct-hs-1')).toHaveLength(1);
    expect(await f.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });

  it('two cases sharing an impact key: one proceeds, the other parks for coordination until the key is released', async () => {
    const a = await f.openCase();
    const b = await f.openCase();
    cases.push(a.caseId, b.caseId);
    const shared = 'billing:test:shared-account';
    f.target.receiptsDown = true;
    f.target.dropAfterApply.add('acct-key-a');
    const first = await approved(a.caseId, a.taskId, creditPacket(a.caseId, { account: 'acct-key-a', amountCents: 10, impactKeys: [shared, 'billing:test:acct-key-a'] }));
    // A's outcome is unknown: its keys stay held (lease expiry or doubt never releases a key).
    await f.waitDispatch(first.gateId, ['reconciling']);

    const second = await approved(b.caseId, b.taskId, creditPacket(b.caseId, { account: 'acct-key-b', amountCents: 20, impactKeys: ['billing:test:acct-key-b', shared] }));
    const parked = await f.waitDispatch(second.gateId, ['coordination']);
    expect(parked['waiting_key']).toBe(shared);
    expect(f.target.mutations('acct-key-b')).toHaveLength(0);
    const coordination = (await f.ledger(b.caseId)).find((e) => e.kind === 'effect_coordination');
    expect(coordination?.body).toMatchObject({ impactKey: shared, heldByCase: a.caseId, sameCase: false });
    const { rows: claims } = await f.db.query<{ impact_key: string; case_id: string }>({ text: 'SELECT impact_key, case_id FROM impact_claims WHERE impact_key = $1', values: [shared] });
    expect(claims).toEqual([{ impact_key: shared, case_id: a.caseId }]);

    f.target.receiptsDown = false;
    await f.waitDispatch(first.gateId, ['settled']);
    await f.waitDispatch(second.gateId, ['settled']);
    expect(f.target.applies.get('acct-key-a')).toBe(1);
    expect(f.target.applies.get('acct-key-b')).toBe(1);
    const { rows: left } = await f.db.query({ text: 'SELECT 1 FROM impact_claims WHERE impact_key = $1', values: [shared] });
    expect(left).toHaveLength(0);
  });

  it('the same packet re-proposed under a new tool-call id: one operation, the same receipt', async () => {
    const { caseId, taskId } = await f.openCase();
    cases.push(caseId);
    const packet = creditPacket(caseId, { account: 'acct-again', amountCents: 321 });
    const first = await approved(caseId, taskId, packet, { callId: '01900000-0000-7000-8000-00000000a001' });
    await f.waitDispatch(first.gateId, ['settled']);
    const call = await callOf(first.gateId);

    // writes.propose's lookup finds the recorded receipt for the mutation key.
    const lookup = await lookupMutation(f.db, packetMutationKey(packet));
    expect(lookup.kind).toBe('completed');
    const receipt = lookup.kind === 'completed' ? lookup.landed?.receipt : undefined;
    expect(receipt).toMatchObject({ body: { accountId: 'acct-again', amountCents: 321 } });

    const again = await approved(caseId, taskId, packet, { callId: '01900000-0000-7000-8000-00000000a002' });
    const d = await f.waitDispatch(again.gateId, ['settled']);
    expect(d['detail']).toMatchObject({ duplicateOf: call['id'] });
    expect(d['call_id']).toBeNull();
    expect(f.target.mutations('acct-again')).toHaveLength(1);
    expect(f.target.applies.get('acct-again')).toBe(1);

    const outcomes = (await f.outbox('effect.outcome')).filter((p) => p['callId'] === call['id']);
    expect(outcomes).toHaveLength(2);
    expect(outcomes[1]).toMatchObject({ outcome: 'applied', receipt });
    const { rows: grants } = await f.db.query<{ state: string; revoke_reason: string }>({ text: 'SELECT state, revoke_reason FROM grants WHERE id = $1::uuid', values: [again.grantId] });
    expect(grants[0]).toMatchObject({ state: 'revoked' });
    expect(grants[0]!.revoke_reason).toMatch(/duplicate mutation/);
    expect(await kinds(caseId)).toContain('effect_duplicate');
  });

  it('every connector result has its ledger row and every ledger verifies', async () => {
    for (const caseId of cases) {
      const ledger = await f.ledger(caseId);
      const intents = ledger.filter((e) => e.kind === 'effect_intent').length;
      // Each intent was executed exactly once here (no crash): one effect_result per intent.
      expect(ledger.filter((e) => e.kind === 'effect_result').length, caseId).toBe(intents);
      // Each preflight (admission + precondition reads) and each settled outcome is recorded.
      expect(ledger.filter((e) => e.kind === 'effect_preflight').length, caseId).toBeGreaterThanOrEqual(intents);
      expect(await f.store.verifyLedger(caseId), caseId).toMatchObject({ ok: true });
    }
    // Connector mutations seen by the target == effect_result rows across these cases.
    const results = (await Promise.all(cases.map((c) => f.ledger(c)))).flat().filter((e) => e.kind === 'effect_result').length;
    const accounts = ['acct-drop', 'acct-hs-1', 'acct-hs-2', 'acct-key-a', 'acct-key-b', 'acct-again'];
    expect(accounts.reduce((n, a) => n + f.target.mutations(a).length, 0)).toBe(results);
  });
});
