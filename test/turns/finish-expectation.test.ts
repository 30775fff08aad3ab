/**
 * Acceptance: a turn-worker (`everdict start --service turn-worker`) learns what its root
 * tasks' finishes do to their cases; once two in a row derived the same, the next ones commit
 * with their `case_state` record in one round trip (libs/store groupCommit.ts, expectations),
 * counted in everdict_case_state_expectations. Every case's chain verifies and its last record
 * states what its derivation gives, expected or not.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, say, testConfig, turnsFixture, type TurnsFixture } from './helpers.js';

describe('finishes a worker expects', () => {
  let fx: TurnsFixture;
  beforeAll(async () => {
    fx = await turnsFixture(
      'turns_finish_expect',
      testConfig({ routes: { main: 'main.json' }, tools: {}, profiles: { agent: { version: '1', route: 'main', prompt: 'You answer tickets.' } } }),
    );
    fx.writeScript('main', [say('resolved')]);
  });
  afterAll(async () => fx?.close());

  it('the third and later root finishes go as expected; each case ends parked telling the customer, its chain intact', async () => {
    const w = await fx.worker('w1');
    const cases: { caseId: string; taskId: string }[] = [];
    // One at a time: each finish is a batch of its own, after the ones before it were learnt.
    for (let i = 0; i < 5; i++) {
      const c = await fx.openCase('ticket', `ticket ${i}`);
      await eventually(async () => (await fx.rows<{ state: string }>('SELECT state FROM tasks WHERE id = $1', [c.taskId]))[0]!.state === 'done', { what: `ticket ${i} done` });
      cases.push(c);
    }
    expect(await w.metric('everdict_case_state_expectations', { outcome: 'met' })).toBe(3);
    expect(await w.metric('everdict_case_state_expectations', { outcome: 'unmet' })).toBe(0);
    for (const c of cases) {
      const records = await fx.store.readLedger(c.caseId);
      expect(records.at(-1)).toMatchObject({ kind: 'case_state', body: { from: 'running', to: 'parked', reason: 'telling_customer', cause: 'task_done', taskId: c.taskId } });
      expect((await fx.rows<{ state: string; state_reason: string }>('SELECT state, state_reason FROM cases WHERE id = $1', [c.caseId]))[0]).toEqual({ state: 'parked', state_reason: 'telling_customer' });
      expect(await fx.store.verifyLedger(c.caseId)).toMatchObject({ ok: true });
    }
  }, 90_000);
});
