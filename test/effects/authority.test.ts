/**
 * Authority is rechecked immediately before dispatch (seed 004 §5): an expired or revoked grant,
 * a packet that no longer hashes to the granted digest, a packet outside what the connector is
 * configured for, a forged approval, a grant used twice — each is refused BEFORE contact, and
 * the target sees zero requests for it.
 *
 * The gate and reconciler run first without any coordinator, so approvals queue up; the grants
 * are then expired, revoked or tampered with, and only then does a coordinator process
 * (`everdict start --service execution-coordinator`) start and take the queued approvals.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildEnvelope, canonicalJson, encodeEnvelope, newId, sealPacket, systemClock } from '@everdict/contracts';
import { PACKET_PAPER_SCHEMA, reserveGrantFor } from '@everdict/store';
import { COORDINATOR, TOKENS, creditPacket, effectsFixture, eventually, type EffectsFixture, type ServiceProc } from './helpers.js';

let f: EffectsFixture;
let node: ServiceProc;

beforeAll(async () => {
  f = await effectsFixture('effects_authority');
  node = await f.start({ services: ['gate', 'reconciler'] });
});
afterAll(async () => {
  await f?.close();
});

async function approve(account: string, o: { environment?: string } = {}) {
  const { caseId, taskId } = await f.openCase();
  const packet = creditPacket(caseId, { account, amountCents: 42, ...o });
  const { gateId, digest } = await f.propose(caseId, taskId, packet);
  await f.waitGate(gateId, 'open');
  const r = await f.decide(node.port, TOKENS.bob, gateId, { decision: 'HW-payment', verdict: 'approve', digest });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return { caseId, taskId, gateId, digest, grantId: String(r.body['grantId']), packet };
}

/** Enqueues a gate.decided as if the gate had sent it (the services' relays publish it). */
async function sendDecided(caseId: string, payload: { gateId: string; taskId: string; packetDigest: string; grantId: string }) {
  await f.store.unitOfWork(async (uow) => {
    const env = buildEnvelope(
      {
        type: 'gate.decided',
        version: 1,
        caseId,
        lineage: { rootCaseId: caseId, parentTaskId: null, ancestry: [] },
        sender: { service: 'gate', taskId: null, profile: null, profileVersion: null },
        trust: 'platform',
        payload: { ...payload, outcome: 'approved' },
      },
      systemClock,
    );
    await uow.enqueue({ id: env.id, type: env.type, caseId }, encodeEnvelope(env));
  });
}

describe('authority rechecked at dispatch', () => {
  it('expired, revoked, tampered and out-of-target grants are refused before contact; a grant is never used twice', async () => {
    const expired = await approve('acct-expired');
    await f.db.query({ text: `UPDATE grants SET expires_at = now() - interval '1 second' WHERE id = $1::uuid`, values: [expired.grantId] });

    const revoked = await approve('acct-revoked');
    expect(await f.post(node.port, TOKENS.mallory, `/v1/gates/${revoked.gateId}/revoke`, { reason: 'no' })).toMatchObject({ status: 403 });
    const rev = await f.post(node.port, TOKENS.olga, `/v1/gates/${revoked.gateId}/revoke`, { reason: 'customer withdrew' });
    expect(rev).toMatchObject({ status: 200, body: { gateState: 'revoked', grantState: 'revoked' } });

    // The stored packet is replaced by one the humans never saw (e.g. a tampered paper revision).
    const tampered = await approve('acct-tampered');
    const other = sealPacket({ ...tampered.packet, params: { accountId: 'acct-tampered', amountCents: 999_999 } });
    await f.store.unitOfWork(async (uow) => {
      const paper = await uow.putPaper({ caseId: tampered.caseId, kind: 'artefact', name: `packets/${tampered.gateId}`, schemaId: PACKET_PAPER_SCHEMA, bytes: Buffer.from(canonicalJson(other), 'utf8') });
      await uow.query({ text: 'UPDATE gates SET packet_revision = $2::int WHERE id = $1::uuid', values: [tampered.gateId, paper.revision] });
    });

    // Approved by a human, but for a target the connector is not configured for.
    const prod = await approve('acct-prod', { environment: 'prod' });

    // A forged approval naming no real grant, and one naming a real grant with another digest.
    const forged = await f.openCase();
    await sendDecided(forged.caseId, { gateId: newId(), taskId: forged.taskId, packetDigest: expired.digest, grantId: newId() });
    await sendDecided(prod.caseId, { gateId: prod.gateId, taskId: prod.taskId, packetDigest: `sha256:${'b'.repeat(64)}`, grantId: prod.grantId });

    // A clean grant, executed once; its approval is then replayed under a new message id.
    const once = await approve('acct-once');

    const coordinator = await f.start({ services: COORDINATOR });
    const refusedReason = async (gateId: string) => (await f.waitDispatch(gateId, ['refused']))['detail'] as Record<string, unknown>;
    expect(await refusedReason(expired.gateId)).toMatchObject({ refused: 'grant_expired' });
    expect(await refusedReason(revoked.gateId)).toMatchObject({ refused: 'grant_revoked' });
    expect(await refusedReason(tampered.gateId)).toMatchObject({ refused: 'digest_mismatch' });
    expect(await refusedReason(prod.gateId)).toMatchObject({ refused: 'connector_refused' });
    expect(String((await refusedReason(prod.gateId))['why'])).toMatch(/target_mismatch/);
    for (const account of ['acct-expired', 'acct-revoked', 'acct-tampered', 'acct-prod']) expect(f.target.touching(account), account).toHaveLength(0);

    // Each refusal is journalled as a refused call and reported to the agent as not applied.
    for (const g of [expired, revoked, tampered, prod]) {
      const outcome = (await f.outbox('effect.outcome')).find((p) => p['grantId'] === g.grantId);
      expect(outcome, g.gateId).toMatchObject({ outcome: 'not_applied', taskId: g.taskId });
      expect(String(outcome!['established'])).toMatch(/^refused before contact/);
      const { rows } = await f.db.query<{ status: string; logical_key: string | null }>({ text: 'SELECT status, logical_key FROM runtime_calls WHERE id = $1::uuid', values: [outcome!['callId']] });
      expect(rows[0]).toEqual({ status: 'refused', logical_key: null });
      expect((await f.ledger(g.caseId)).map((e) => e.kind)).toContain('effect_refused');
    }
    const { rows: expiredGrant } = await f.db.query<{ state: string }>({ text: 'SELECT state FROM grants WHERE id = $1::uuid', values: [expired.grantId] });
    expect(expiredGrant[0]!.state).toBe('expired');
    // The mismatching approval of a real grant is recorded in its case and dispatches nothing extra.
    await eventually(async () => (await f.ledger(prod.caseId)).some((e) => e.kind === 'dispatch_refused'), { what: 'dispatch_refused' });

    await f.waitDispatch(once.gateId, ['settled']);
    expect(f.target.mutations('acct-once')).toHaveLength(1);
    await sendDecided(once.caseId, { gateId: once.gateId, taskId: once.taskId, packetDigest: once.digest, grantId: once.grantId });
    await eventually(async () => (await f.ledger(once.caseId)).some((e) => e.kind === 'grant_reuse_refused'), { what: 'grant_reuse_refused' });
    expect(f.target.mutations('acct-once')).toHaveLength(1);
    // The store itself refuses a second reservation of a spent grant.
    const second = await f.store.unitOfWork((uow) => reserveGrantFor(uow, once.grantId, newId()));
    expect(second).toBe(false);
    const { rows: spent } = await f.db.query<{ state: string }>({ text: 'SELECT state FROM grants WHERE id = $1::uuid', values: [once.grantId] });
    expect(spent[0]!.state).toBe('consumed');

    for (const g of [expired, revoked, tampered, prod, once]) expect(await f.store.verifyLedger(g.caseId)).toMatchObject({ ok: true });
    await coordinator.kill('SIGTERM');
  });
});
