/**
 * The coordinator SIGKILLed between intent and execute, and between execute and outcome — five
 * times each, on both real connectors (HTTP target service, Postgres estate): exactly one effect
 * per approved packet, every time.
 *
 * The gate and the reconciler run on one process for the whole file; the coordinator is its own
 * process (`everdict start --service execution-coordinator`), started with EVERDICT_CRASHPOINT so it
 * kills itself at the point, then restarted. A restarted coordinator never executes an intent
 * again: the lapsed execution goes to the reconciler's WhatLanded, and only a conclusive "not
 * applied" lets a new attempt run.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COORDINATOR, TOKENS, crashLog, creditPacket, effectsFixture, entryPacket, type EffectsFixture, type ServiceProc } from './helpers.js';

let f: EffectsFixture;
let node: ServiceProc;

beforeAll(async () => {
  f = await effectsFixture('effects_crash');
  node = await f.start({ services: ['gate', 'reconciler'] });
});
afterAll(async () => {
  await f?.close();
});

interface Approved {
  readonly gateId: string;
  readonly check: () => Promise<number>;
}

/** Packet i: even → an HTTP credit, odd → a Postgres estate entry (two decisions: HW-ddl + H5). */
async function proposeAndApprove(point: string, i: number): Promise<Approved> {
  const { caseId, taskId } = await f.openCase();
  if (i % 2 === 0) {
    const account = `crash-${point}-${i}`.replace(/_/g, '-');
    const { gateId, digest } = await f.propose(caseId, taskId, creditPacket(caseId, { account, amountCents: 100 + i }));
    await f.waitGate(gateId, 'open');
    expect((await f.decide(node.port, TOKENS.bob, gateId, { decision: 'HW-payment', verdict: 'approve', digest })).status).toBe(201);
    return { gateId, check: async () => f.target.applies.get(account) ?? 0 };
  }
  const entryId = `${point}-${i}`;
  const { gateId, digest } = await f.propose(caseId, taskId, entryPacket(caseId, { entryId, account: 'acct-x', amount: 10 + i }));
  await f.waitGate(gateId, 'open');
  for (const decision of ['HW-ddl', 'H5']) expect((await f.decide(node.port, TOKENS.alice, gateId, { decision, verdict: 'approve', digest })).status).toBe(201);
  return { gateId, check: () => f.estate.entries(entryId) };
}

async function crashLoop(point: 'before_execute' | 'after_execute', times: number): Promise<void> {
  const log = join(f.dir, `crash-${point}.log`);
  const packets: Approved[] = [];
  for (let i = 0; i < times; i++) {
    // One coordinator at a time. Before execute, the new process first recovers the previous
    // packet — its lapsed intent proven not applied, then a new attempt: arrival 1 at the point —
    // and dies on this iteration's packet (arrival 2). After execute, recovery never executes
    // again (the receipt says applied), so the new packet is arrival 1.
    const arrival = point === 'before_execute' && i > 0 ? 2 : 1;
    const coordinator = await f.start({ main: COORDINATOR, env: { EVERDICT_CRASHPOINT: `${point}:${arrival}`, EVERDICT_CRASH_LOG: log }, mayCrash: true });
    if (i > 0) {
      const previous = packets[i - 1]!;
      await f.waitDispatch(previous.gateId, ['settled'], 60_000);
      expect(await previous.check(), `packet ${i - 1} recovered after a ${point} crash`).toBe(1);
    }
    packets.push(await proposeAndApprove(point, i));
    const exit = await coordinator.exited;
    expect(exit.signal, coordinator.output().slice(-2000)).toBe('SIGKILL');
    expect(crashLog(log).filter((l) => l.point === point).map((l) => l.grantId)).toHaveLength(i + 1);
  }
  // Each kill happened on a different packet.
  expect(new Set(crashLog(log).map((l) => l.grantId)).size).toBe(times);

  const clean = await f.start({ services: COORDINATOR });
  for (const p of packets) await f.waitDispatch(p.gateId, ['settled'], 60_000);
  for (const [i, p] of packets.entries()) expect(await p.check(), `packet ${i} after ${point} crashes`).toBe(1);
  await clean.kill('SIGTERM');

  // Every crash left an intent without an outcome that was reconciled, never re-executed blind.
  const { rows } = await f.db.query<{ abandoned: number; retries: number }>({
    text: `SELECT count(*) FILTER (WHERE kind = 'effect_abandoned')::int AS abandoned, count(*) FILTER (WHERE kind = 'effect_retry')::int AS retries
             FROM ledger WHERE case_id IN (SELECT case_id FROM effect_dispatches WHERE gate_id = ANY($1::uuid[]))`,
    values: [packets.map((p) => p.gateId)],
  });
  expect(rows[0]!.abandoned).toBeGreaterThanOrEqual(times);
  if (point === 'after_execute') expect(rows[0]!.retries).toBe(0); // applied each time: nothing to retry
  else expect(rows[0]!.retries).toBeGreaterThanOrEqual(times); // proven not applied, then one new attempt
  for (const p of packets) {
    const d = await f.dispatchOf(p.gateId);
    expect(await f.store.verifyLedger(String(d!['case_id']))).toMatchObject({ ok: true });
  }
}

describe('coordinator crashes', () => {
  it('SIGKILL between intent and execute, 5 times: exactly one effect per approved packet', async () => {
    await crashLoop('before_execute', 5);
  }, 240_000);

  it('SIGKILL between execute and outcome, 5 times: exactly one effect per approved packet', async () => {
    await crashLoop('after_execute', 5);
  }, 240_000);
});
