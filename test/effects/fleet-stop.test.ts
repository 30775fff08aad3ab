/**
 * The fleet-wide HARD stop (seed 004 §7), against real services (intake + gate + coordinator +
 * reconciler composed on one child process), a real target HTTP service, Postgres and RabbitMQ:
 * - while it is in force an approved effect is not executed (the target sees no request at all,
 *   the dispatch stays pending, held — never refused), reads keep answering and an effect whose
 *   outcome is unknown still reconciles;
 * - after `everdict fleet resume` the held effect executes exactly once;
 * - the stop is durable (who/when/why), visible in `everdict fleet`, GET /v1/fleet and /metrics
 *   (everdict_fleet_stop{kind}), and only an operator may set or lift it.
 */
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO, TOKENS, creditPacket, effectsFixture, eventually, type EffectsFixture, type ServiceProc } from './helpers.js';

let f: EffectsFixture;
let node: ServiceProc;

beforeAll(async () => {
  f = await effectsFixture('effects_fleet_stop');
  node = await f.start({ services: ['intake', 'gate', 'execution-coordinator', 'reconciler'] });
}, 120_000);
afterAll(async () => {
  await f?.close();
});

async function approved(caseId: string, taskId: string, packet: ReturnType<typeof creditPacket>) {
  const { gateId, digest } = await f.propose(caseId, taskId, packet);
  await f.waitGate(gateId, 'open');
  const r = await f.decide(node.port, TOKENS.bob, gateId, { decision: 'HW-payment', verdict: 'approve', digest });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return gateId;
}

const everdict = (token: string, ...args: string[]) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((done) => {
    execFile(process.execPath, ['--conditions=source', '--import', 'tsx', 'cli/src/main.ts', ...args], { cwd: REPO, env: { ...process.env, EVERDICT_URL: `http://127.0.0.1:${node.port}`, EVERDICT_TOKEN: token }, timeout: 60_000 }, (err, stdout, stderr) =>
      done({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });

const gauge = async (kind: string) => {
  const text = await (await fetch(`http://127.0.0.1:${node.port}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('everdict_fleet_stop{') && l.includes(`kind="${kind}"`));
  return line === undefined ? undefined : Number(line.split(' ').pop());
};

describe('fleet hard stop', () => {
  it('holds every new dispatch (the target sees nothing) while reads and reconciliation go on; resume executes it once', async () => {
    expect(await gauge('hard')).toBe(0);

    // Before the stop: a credit lands but its answer is lost and the receipts are down — unknown.
    const before = await f.openCase();
    f.target.dropAfterApply.add('acct-unknown');
    f.target.receiptsDown = true;
    const unknownGate = await approved(before.caseId, before.taskId, creditPacket(before.caseId, { account: 'acct-unknown', amountCents: 100 }));
    await f.waitDispatch(unknownGate, ['reconciling']);

    // Only an operator stops the fleet; a reason is required.
    expect((await f.post(node.port, TOKENS.bob, '/v1/fleet/stop', { kind: 'hard', reason: 'x' })).status).toBe(403);
    expect(await f.post(node.port, TOKENS.olga, '/v1/fleet/stop', { kind: 'hard' })).toMatchObject({ status: 400, body: { field: 'reason' } });
    expect(await f.post(node.port, TOKENS.olga, '/v1/fleet/stop', { kind: 'sideways', reason: 'x' })).toMatchObject({ status: 400, body: { field: 'kind' } });
    const stop = await everdict(TOKENS.olga, 'fleet', 'stop', '--hard', '--reason', 'incident 42: billing double-posts');
    expect(stop.code, stop.stderr).toBe(0);
    expect(stop.stdout).toContain('stop hard: IN FORCE');

    // A new approved effect: held pending, never sent, never refused.
    const { caseId, taskId } = await f.openCase();
    const gateId = await approved(caseId, taskId, creditPacket(caseId, { account: 'acct-held', amountCents: 250 }));
    await eventually(async () => (await f.dispatchOf(gateId))?.['detail'] && ((await f.dispatchOf(gateId))!['detail'] as Record<string, unknown>)['fleetStopHeld'] === true, { timeoutMs: 20_000, what: 'dispatch held by the fleet stop' });
    await new Promise((r) => setTimeout(r, 2_500)); // several recheck rounds (2 s) and dispatch polls
    expect(f.target.touching('acct-held')).toHaveLength(0);
    expect((await f.dispatchOf(gateId))!['state']).toBe('pending');
    const held = (await f.ledger(caseId)).filter((e) => e.kind === 'effect_held');
    expect(held).toHaveLength(1); // recorded once, not once per look
    expect(held[0]!.body).toMatchObject({ why: 'fleet_hard_stop', reason: 'incident 42: billing double-posts' });
    expect((await f.ledger(caseId)).map((e) => e.kind)).not.toContain('effect_refused');

    // Reads keep answering; reconciliation goes on: the unknown credit settles from its receipt.
    expect((await f.get(node.port, TOKENS.alice, `/v1/cases/${caseId}`)).status).toBe(200);
    expect((await f.get(node.port, TOKENS.alice, `/v1/cases/${caseId}/ledger`)).status).toBe(200);
    f.target.receiptsDown = false;
    await f.waitDispatch(unknownGate, ['settled']);
    expect(f.target.applies.get('acct-unknown')).toBe(1);

    // Visible: GET /v1/fleet, `everdict fleet`, /metrics.
    const view = await f.get(node.port, TOKENS.olga, '/v1/fleet');
    expect(view.body['stops']).toEqual([
      expect.objectContaining({ kind: 'hard', active: true, changedBy: 'olga', reason: 'incident 42: billing double-posts' }),
      expect.objectContaining({ kind: 'soft', active: false }),
    ]);
    const status = await everdict(TOKENS.olga, 'fleet');
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/stop hard: IN FORCE since .* by olga: incident 42/);
    expect(status.stdout).toContain('stop soft: off');
    expect(await gauge('hard')).toBe(1);
    expect(await gauge('soft')).toBe(0);

    // Only an operator lifts it; the resume releases the held dispatch, which executes once.
    expect((await f.post(node.port, TOKENS.bob, '/v1/fleet/resume', {})).status).toBe(403);
    const resume = await everdict(TOKENS.olga, 'fleet', 'resume', '--reason', 'fixed');
    expect(resume.code, resume.stderr).toBe(0);
    expect(resume.stdout).toContain('lifted: hard');
    expect(resume.stdout).toContain('1 held dispatch(es) released');
    await f.waitDispatch(gateId, ['settled']);
    expect(f.target.mutations('acct-held')).toHaveLength(1);
    expect(f.target.applies.get('acct-held')).toBe(1);
    expect(await gauge('hard')).toBe(0);

    // Durable history: who stopped, who resumed, why.
    const { rows } = await f.db.query<{ action: string; kind: string; actor: string; reason: string | null }>({ text: 'SELECT action, kind, actor, reason FROM fleet_stop_events ORDER BY seq' });
    expect(rows).toEqual([
      { action: 'stop', kind: 'hard', actor: 'olga', reason: 'incident 42: billing double-posts' },
      { action: 'resume', kind: 'hard', actor: 'olga', reason: 'fixed' },
    ]);
    for (const c of [before.caseId, caseId]) expect(await f.store.verifyLedger(c)).toMatchObject({ ok: true });
  }, 120_000);
});
