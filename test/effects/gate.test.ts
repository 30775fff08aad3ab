/**
 * The gate's decisions over its HTTP API (DESIGN §7), against a real gate process: bearer tokens
 * → principals and roles, every applicable decision derived and recorded separately, decisions
 * bound to the digest (a wrong digest records nothing), rejection back to the agent with the
 * reason, refusal of a request whose packet does not match, gate expiry.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TOKENS, creditPacket, effectsFixture, entryPacket, eventually, type EffectsFixture, type ServiceProc } from './helpers.js';

let f: EffectsFixture;
let node: ServiceProc;

beforeAll(async () => {
  f = await effectsFixture('effects_gate');
  node = await f.start({});
});
afterAll(async () => {
  await f?.close();
});

const decisionRows = async (gateId: string) =>
  (await f.db.query<{ decision: string; verdict: string; principal: string; role: string; digest: string }>({
    text: 'SELECT decision, verdict, principal, role, digest FROM decisions WHERE gate_id = $1::uuid ORDER BY decision',
    values: [gateId],
  })).rows;

const decidedFor = async (gateId: string) => (await f.outbox('gate.decided')).filter((p) => p['gateId'] === gateId);

describe('gate', () => {
  it('derives every applicable decision; each is recorded separately, bound to the digest, and the grant follows the last', async () => {
    const { caseId, taskId } = await f.openCase();
    const { gateId, digest } = await f.propose(caseId, taskId, entryPacket(caseId, { entryId: 'gate-1', account: 'acct-g', amount: 5 }));
    await f.waitGate(gateId, 'open');

    // Without a known token: 401. The API shares the port with /metrics (ctx.addRoutes).
    expect((await fetch(`http://127.0.0.1:${node.port}/v1/gates`)).status).toBe(401);
    expect((await f.get(node.port, 'not-a-known-token', '/v1/gates')).status).toBe(401);
    expect((await fetch(`http://127.0.0.1:${node.port}/metrics`)).status).toBe(200);

    // Visibility: alice holds dba + customer_owner; bob only finance; carol is dba for another customer.
    const forAlice = await f.get(node.port, TOKENS.alice, '/v1/gates?state=open');
    expect(forAlice.status).toBe(200);
    const gate = (forAlice.body['gates'] as Record<string, unknown>[]).find((g) => g['id'] === gateId)!;
    expect(gate).toMatchObject({ packetDigest: digest, operation: 'entries.add', effectClass: 'ddl', state: 'open' });
    expect(gate['decisions']).toEqual([
      expect.objectContaining({ decision: 'H5', role: 'customer_owner', canDecide: true, verdict: null }),
      expect.objectContaining({ decision: 'HW-ddl', role: 'dba', canDecide: true, verdict: null }),
    ]);
    expect(gate['packet']).toMatchObject({ operation: { connector: 'estate', name: 'entries.add' }, params: { entryId: 'gate-1' } });
    for (const token of [TOKENS.bob, TOKENS.carol, TOKENS.mallory]) {
      const seen = await f.get(node.port, token, '/v1/gates?state=open');
      expect((seen.body['gates'] as { id: string }[]).map((g) => g.id)).not.toContain(gateId);
      expect((await f.get(node.port, token, `/v1/gates/${gateId}`)).status).toBe(404);
    }
    expect((await f.get(node.port, TOKENS.alice, '/v1/gates?state=bogus')).status).toBe(400);

    // A wrong digest is refused and records nothing.
    const wrong = `sha256:${'0'.repeat(64)}`;
    const refused = await f.decide(node.port, TOKENS.alice, gateId, { decision: 'HW-ddl', verdict: 'approve', digest: wrong });
    expect(refused).toMatchObject({ status: 409, body: { error: 'digest_mismatch', field: 'digest' } });
    expect(await decisionRows(gateId)).toEqual([]);
    // A principal without the role: 403, nothing recorded; a malformed body: 400 naming the field.
    expect(await f.decide(node.port, TOKENS.bob, gateId, { decision: 'HW-ddl', verdict: 'approve', digest })).toMatchObject({ status: 403, body: { error: 'role_required' } });
    expect(await f.decide(node.port, TOKENS.alice, gateId, { decision: 'HW-ddl', verdict: 'maybe', digest })).toMatchObject({ status: 400, body: { field: 'verdict' } });
    expect(await f.decide(node.port, TOKENS.alice, gateId, { decision: 'HW-other', verdict: 'approve', digest })).toMatchObject({ status: 422, body: { error: 'unknown_decision' } });
    expect(await decisionRows(gateId)).toEqual([]);

    // One person holding both roles answers both decisions; each is its own row.
    const first = await f.decide(node.port, TOKENS.alice, gateId, { decision: 'HW-ddl', verdict: 'approve', digest });
    expect(first).toMatchObject({ status: 201, body: { gateState: 'open', pending: ['H5'] } });
    expect(await decidedFor(gateId)).toEqual([]);
    // The same answer again is acknowledged, not recorded twice.
    expect((await f.decide(node.port, TOKENS.alice, gateId, { decision: 'HW-ddl', verdict: 'approve', digest })).status).toBe(200);
    const second = await f.decide(node.port, TOKENS.alice, gateId, { decision: 'H5', verdict: 'approve', digest });
    expect(second).toMatchObject({ status: 201, body: { gateState: 'approved' } });
    const grantId = String(second.body['grantId']);
    expect(await decisionRows(gateId)).toEqual([
      { decision: 'H5', verdict: 'approve', principal: 'alice', role: 'customer_owner', digest },
      { decision: 'HW-ddl', verdict: 'approve', principal: 'alice', role: 'dba', digest },
    ]);
    expect(await decidedFor(gateId)).toEqual([expect.objectContaining({ outcome: 'approved', grantId, packetDigest: digest, taskId })]);
    const { rows: grants } = await f.db.query<{ packet_digest: string; future: boolean }>({ text: 'SELECT packet_digest, expires_at > now() AS future FROM grants WHERE id = $1::uuid', values: [grantId] });
    expect(grants).toEqual([{ packet_digest: digest, future: true }]);
    // A decided gate takes no further verdicts.
    expect(await f.decide(node.port, TOKENS.alice, gateId, { decision: 'H5', verdict: 'reject', digest })).toMatchObject({ status: 409, body: { error: 'already_decided' } });

    // The grant is executed on the Postgres estate and post-checked.
    await f.waitDispatch(gateId, ['settled']);
    expect(await f.estate.entries('gate-1')).toBe(1);
    const postcheck = (await f.ledger(caseId)).find((e) => e.kind === 'effect_postcheck');
    expect(postcheck?.body).toMatchObject({ status: 'holds' });
    expect((await f.ledger(caseId)).map((e) => e.kind)).toEqual(
      expect.arrayContaining(['gate_opened', 'decision_recorded', 'grant_issued', 'effect_queued', 'effect_preflight', 'effect_intent', 'effect_result', 'effect_postcheck', 'effect_settled']),
    );
    expect(await f.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });

  it('requests that arrive together share a unit of work: several inbox rows per transaction, every gate opened once', async () => {
    const N = 16;
    const cases = await Promise.all(Array.from({ length: N }, () => f.openCase()));
    // One commit: the relay publishes them together and the gate's consumer takes them as a batch.
    const gates = await f.proposeAll(cases.map((c, i) => ({ ...c, packet: entryPacket(c.caseId, { entryId: `batch-${i}`, account: 'acct-batch', amount: i + 1 }) })));
    for (const g of gates) await f.waitGate(g.gateId, 'open');
    const { rows: opened } = await f.db.query<{ n: number }>({ text: 'SELECT count(*)::int AS n FROM gates WHERE id = ANY($1::uuid[])', values: [gates.map((g) => g.gateId)] });
    expect(opened[0]!.n).toBe(N);
    // Inbox rows written by one transaction carry its id (xmin): fewer transactions than deliveries.
    const { rows: units } = await f.db.query<{ n: number; applied: number }>({
      text: `SELECT count(DISTINCT i.xmin::text)::int AS n, count(*) FILTER (WHERE i.disposition = 'applied')::int AS applied
               FROM inbox_messages i JOIN outbox_messages o ON o.message_id = i.message_id
              WHERE i.consumer = 'gate' AND o.type = 'gate.requested' AND o.case_id = ANY($1::uuid[])`,
      values: [cases.map((c) => c.caseId)],
    });
    expect(units[0]!.applied).toBe(N);
    expect(units[0]!.n).toBeLessThan(N);
  });

  it('a rejection goes back to the agent with the reason; nothing is granted or executed', async () => {
    const { caseId, taskId } = await f.openCase();
    const { gateId, digest } = await f.propose(caseId, taskId, creditPacket(caseId, { account: 'acct-rejected', amountCents: 50 }));
    await f.waitGate(gateId, 'open');
    const r = await f.decide(node.port, TOKENS.bob, gateId, { decision: 'HW-payment', verdict: 'reject', digest, reason: 'not this month' });
    expect(r).toMatchObject({ status: 201, body: { gateState: 'rejected' } });
    expect(await decidedFor(gateId)).toEqual([expect.objectContaining({ outcome: 'rejected', taskId, reason: 'HW-payment rejected by bob: not this month' })]);
    const { rows } = await f.db.query({ text: 'SELECT 1 FROM grants WHERE gate_id = $1::uuid', values: [gateId] });
    expect(rows).toHaveLength(0);
    expect(await f.dispatchOf(gateId)).toBeUndefined();
    expect(f.target.touching('acct-rejected')).toHaveLength(0);
  });

  it('a request whose packet does not hash to its digest, or that names a read, is refused and answered at once', async () => {
    const { caseId, taskId } = await f.openCase();
    const bad = await f.propose(caseId, taskId, creditPacket(caseId, { account: 'acct-bad', amountCents: 1 }), { digest: `sha256:${'a'.repeat(64)}` });
    const badGate = await f.waitGate(bad.gateId, 'rejected');
    expect(String(badGate['reason'])).toMatch(/does not hash to packetDigest/);
    expect(await decidedFor(bad.gateId)).toEqual([expect.objectContaining({ outcome: 'rejected' })]);

    const read = await f.propose(caseId, taskId, creditPacket(caseId, { account: 'acct-read', amountCents: 1, operation: 'accounts.get' }));
    const readGate = await f.waitGate(read.gateId, 'rejected');
    expect(String(readGate['reason'])).toMatch(/accounts\.get is a read/);
    // Nothing to decide on a refused gate.
    expect(await f.decide(node.port, TOKENS.bob, read.gateId, { decision: 'HW-payment', verdict: 'approve', digest: read.digest })).toMatchObject({ status: 422 });
  });

  it('an undecided gate expires: the reconciler closes it, the agent is told, and a late verdict is refused', async () => {
    const { caseId, taskId } = await f.openCase();
    const { gateId, digest } = await f.propose(caseId, taskId, creditPacket(caseId, { account: 'acct-late', amountCents: 9 }), { expiresAt: new Date(Date.now() + 1500).toISOString() });
    await f.waitGate(gateId, 'open');
    await f.waitGate(gateId, 'expired');
    await eventually(async () => (await decidedFor(gateId)).some((p) => p['outcome'] === 'expired'), { what: 'gate.decided expired' });
    expect(await f.decide(node.port, TOKENS.bob, gateId, { decision: 'HW-payment', verdict: 'approve', digest })).toMatchObject({ status: 409, body: { error: 'gate_not_open' } });
    expect(await decisionRows(gateId)).toEqual([]);
  });
});
