/**
 * A turn-worker SIGKILLed in the middle of a proposal (issue 5 × issue 4's crash points): the
 * proposal becomes durable only with the turn's commit, so whatever instant the process dies at,
 * the case ends with exactly one gate, one grant and one operation at the target.
 *
 *   after_response      the writes__propose intent is durable, the handler has not run
 *   after_tool_results  the handler ran (audit included); packet and gate request only in memory
 *   after_commit        packet paper + gate.requested + park committed; the delivery not acked
 *
 * A node with the crash point dies there (a real SIGKILL); a second node without one takes the
 * case over. The resumed proposal runs again (outcomeAtomic) rather than being withheld as unknown.
 * The proposal rides with a billing read: a batch of the proposal alone is folded into the turn's
 * commit (services/turn-worker/src/durability.ts) and never reaches after_response, while a
 * connector read is observable, so its batch journals both intents before either runs.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetConfig } from '@everdict/contracts';
import { openTestCase } from '../turns/helpers.js';
import { TOKENS, agentConnectors, effectsFixture, eventually, fleetConfig, proposeCredit, type EffectsFixture } from './helpers.js';

let f: EffectsFixture;
let config: FleetConfig;
const SERVICES = ['turn-worker', 'gate', 'execution-coordinator', 'reconciler'];

beforeAll(async () => {
  f = await effectsFixture('effects_agent_crash');
  writeFileSync(join(f.dir, 'writer.json'), JSON.stringify({ steps: [{ toolCalls: [{ name: 'billing__accounts_get', arguments: { accountId: 'acct-crash' } }, proposeCredit('acct-crash', 300)] }, { text: 'Credited.' }] }));
  writeFileSync(join(f.dir, 'auditor.json'), JSON.stringify({ steps: [{ text: '{"verdict": "approve", "reason": "matches the ticket"}' }] }));
  config = {
    ...fleetConfig(),
    routes: { writer: { adapter: 'scripted', model: 'scripted', scriptPath: 'writer.json' }, auditor: { adapter: 'scripted', model: 'scripted', scriptPath: 'auditor.json' } },
    profiles: { writer: { version: '1', route: 'writer', prompt: 'You credit accounts.', auditor: 'auditor', reads: ['billing/accounts.get'] }, auditor: { version: '1', route: 'auditor', prompt: 'You audit.' } },
    caseTypes: { writer: { rootProfile: 'writer', scope: { reads: 'all', writes: ['writes__propose', 'billing'], forbidden: [] } } },
    connectors: agentConnectors(),
    // A short lease: the survivor takes the dead worker's task over within seconds.
    runtime: { leaseTtlMs: 2000, sweepIntervalMs: 200 },
  };
  writeFileSync(join(f.dir, 'agents.json'), JSON.stringify(config, null, 2));
});

afterAll(async () => {
  await f?.close();
});

describe('a turn-worker killed mid-proposal', () => {
  it.each(['after_response', 'after_tool_results', 'after_commit'])('SIGKILL %s: one gate, one grant, one operation', async (point) => {
    const env = { EVERDICT_CONFIG: join(f.dir, 'agents.json') };
    // Every node of this test stays up until close(); only the one with the crash point dies.
    const doomed = await f.start({ services: SERVICES, env: { ...env, EVERDICT_CRASHPOINT: `${point}:1` }, mayCrash: true });
    const account = 'acct-crash';
    const before = f.target.applies.get(account) ?? 0;
    const opened = await openTestCase(f.store, config, { caseType: 'writer', originKey: `crash-${point}`, objective: 'credit' });
    const taskId = opened.taskId;
    expect((await doomed.exited).signal).toBe('SIGKILL');

    const node = await f.start({ services: SERVICES, env });
    const gate = await eventually(
      async () => {
        const { rows } = await f.db.query<{ id: string; state: string; packet_digest: string; propose_call_id: string }>({
          text: `SELECT id, state, packet_digest, propose_call_id FROM gates WHERE case_id = $1::uuid`,
          values: [opened.caseId],
        });
        return rows.length > 0 && rows[0]!.state === 'open' ? rows : undefined;
      },
      { timeoutMs: 40_000, what: `gate of the ${point} case` },
    );
    expect(gate).toHaveLength(1);
    // The gate names the journalled proposal call, which completed (never withheld as unknown).
    const { rows: calls } = await f.db.query<{ id: string; status: string }>({
      text: `SELECT id, status FROM runtime_calls WHERE task_id = $1::uuid AND tool_name = 'writes__propose'`,
      values: [taskId],
    });
    expect(calls).toEqual([{ id: gate[0]!.propose_call_id, status: 'completed' }]);

    const r = await f.decide(node.port, TOKENS.bob, gate[0]!.id, { decision: 'HW-payment', verdict: 'approve', digest: gate[0]!.packet_digest });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    await eventually(
      async () => {
        const { rows } = await f.db.query<{ state: string }>({ text: 'SELECT state FROM tasks WHERE id = $1::uuid', values: [taskId] });
        return rows[0]?.state === 'done';
      },
      { timeoutMs: 40_000, what: `task of the ${point} case done` },
    );
    expect((f.target.applies.get(account) ?? 0) - before).toBe(1);
    const { rows: gates } = await f.db.query<{ n: number }>({ text: 'SELECT count(*)::int AS n FROM gates WHERE case_id = $1::uuid', values: [opened.caseId] });
    expect(gates[0]!.n).toBe(1);
    expect(await f.store.verifyLedger(opened.caseId)).toMatchObject({ ok: true });
    await node.kill('SIGTERM');
  }, 120_000);
});
