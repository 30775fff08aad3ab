/**
 * Acceptance (issue 4): two cases run concurrently with sub-agents on real worker processes; a
 * child's plan reaches its parent and is confirmed there; each root parks on a question; the
 * answer to one question resumes exactly that task and nothing else.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, eventually, say, testConfig, turnsFixture, type TurnsFixture, type WorkerProc } from './helpers.js';

const QUESTION = {
  gap: 'which environment the fix goes to',
  checked: 'both sub-agents checked the logs',
  dependsOn: 'the deployment step',
  alternatives: ['staging first', 'production directly'],
  decisionNeeded: 'choose the target environment',
};

describe('sub-agents, plans and questions across processes', () => {
  let fx: TurnsFixture;
  let workers: WorkerProc[] = [];
  beforeAll(async () => {
    fx = await turnsFixture(
      'turns_graph',
      testConfig({
        routes: { lead: 'lead.json', helper: 'helper.json' },
        profiles: {
          lead: { version: '1', route: 'lead', prompt: 'You lead the case.', tools: ['lookup'], childProfile: 'helper' },
          helper: { version: '1', route: 'helper', prompt: 'You help the lead.', tools: ['lookup'] },
        },
      }),
    );
    fx.writeScript('lead', [call(['spawn', { objective: 'check the logs of A' }], ['spawn', { objective: 'check the logs of B' }]), call(['wait', { for: 'question', reason: 'need a decision', question: QUESTION }]), say('all done')]);
    fx.writeScript('helper', [call(['plan', { steps: [{ id: 'look', title: 'look at the logs' }, { id: 'report', title: 'report back', dependsOn: ['look'] }] }], ['lookup', { q: 'logs' }]), say('the logs are clean')]);
    workers = await Promise.all([fx.worker('g1'), fx.worker('g2')]);
  });
  afterAll(async () => fx?.close());

  const task = async (id: string) => (await fx.rows<{ state: string; park_reason: string | null; park_detail: { questionId?: string } | null }>('SELECT state, park_reason, park_detail FROM tasks WHERE id = $1', [id]))[0]!;
  const logs = () => workers.map((w) => w.output().slice(-3000)).join('\n----\n');

  it('runs two cases with children to their questions, and an answer wakes exactly its task', async () => {
    const [a, b] = await Promise.all([fx.openCase('ticket', 'fix case A'), fx.openCase('ticket', 'fix case B')]);
    for (const root of [a, b]) {
      await eventually(async () => (await task(root.taskId)).park_reason === 'question', { timeoutMs: 40_000, what: `root ${root.taskId} parked on its question` }).catch((e: unknown) => {
        throw new Error(`${String(e)}\n${logs()}`);
      });
    }

    for (const root of [a, b]) {
      const children = await fx.rows<{ id: string; state: string; depth: number; ancestry: string[]; spawn_call_id: string; context: { tools: string[] } }>(
        'SELECT id, state, depth, ancestry::text[] AS ancestry, spawn_call_id, context FROM tasks WHERE parent_id = $1 ORDER BY created_at',
        [root.taskId],
      );
      expect(children).toHaveLength(2);
      for (const c of children) {
        expect(c).toMatchObject({ state: 'done', depth: 1, ancestry: [root.taskId] });
        expect(c.context.tools).toEqual(['lookup']); // the parent's read-only tools within its scope
        // The child's plan reached its parent: an immutable revision, confirmed by the parent, projected as steps.
        const conf = await fx.rows<{ revision: number; confirmed_by: string }>('SELECT revision, confirmed_by FROM plan_confirmations WHERE task_id = $1', [c.id]);
        expect(conf).toEqual([{ revision: 1, confirmed_by: root.taskId }]);
        const steps = await fx.rows<{ step_id: string; status: string }>('SELECT step_id, status FROM plan_steps WHERE task_id = $1 ORDER BY step_id', [c.id]);
        expect(steps.map((s) => s.step_id)).toEqual(['look', 'report']);
      }
      // The parent saw both reports in the request that asked its question. A child's plan note
      // usually comes with them, but competing consumers do not order one child's plan.submitted
      // before the other child's task.finished: a plan confirmed after the parent's wake is
      // carried by its next turn (checked below, once the answer has run it).
      const notes = await eventually(
        async () => {
          const rows = await fx.rows<{ kind: string; consumed_turn: number | null }>('SELECT kind, consumed_turn FROM task_notes WHERE task_id = $1 ORDER BY seq', [root.taskId]);
          return rows.length === 4 ? rows : undefined;
        },
        { what: `the four notes of root ${root.taskId}` },
      );
      expect(notes.map((n) => n.kind).sort()).toEqual(['child_report', 'child_report', 'plan', 'plan']);
      expect(notes.filter((n) => n.kind === 'child_report').map((n) => n.consumed_turn)).toEqual([1, 1]);
      for (const n of notes.filter((x) => x.kind === 'plan')) expect([1, null]).toContain(n.consumed_turn);
      const q = await fx.rows<{ id: string; task_id: string; asked_by: string; gap: string; alternatives: string[]; decision_needed: string; answer: string | null }>('SELECT * FROM questions WHERE case_id = $1', [root.caseId]);
      expect(q).toHaveLength(1);
      expect(q[0]).toMatchObject({ task_id: root.taskId, asked_by: root.taskId, gap: QUESTION.gap, alternatives: QUESTION.alternatives, decision_needed: QUESTION.decisionNeeded, answer: null });
      expect((await task(root.taskId)).park_detail?.questionId).toBe(q[0]!.id);
    }

    // Answer case A only: A's root wakes and finishes; B's root stays parked on its question.
    const qa = (await fx.rows<{ id: string }>('SELECT id FROM questions WHERE case_id = $1', [a.caseId]))[0]!;
    await fx.sendAs('question.answered', a.caseId, { questionId: qa.id, taskId: a.taskId, answer: 'staging first', answeredBy: 'alice' });
    await eventually(async () => (await task(a.taskId)).state === 'done', { timeoutMs: 30_000, what: 'root A done' }).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${logs()}`);
    });
    expect(await task(b.taskId)).toMatchObject({ state: 'parked', park_reason: 'question' });

    // A replayed answer (same message id, same hash) is a duplicate; another answer to an answered question changes nothing.
    await fx.sendAs('question.answered', a.caseId, { questionId: qa.id, taskId: a.taskId, answer: 'production', answeredBy: 'mallory' });
    const qb = (await fx.rows<{ id: string }>('SELECT id FROM questions WHERE case_id = $1', [b.caseId]))[0]!;
    await fx.sendAs('question.answered', b.caseId, { questionId: qb.id, taskId: b.taskId, answer: 'production directly', answeredBy: 'bob' });
    await eventually(async () => (await task(b.taskId)).state === 'done', { timeoutMs: 30_000, what: 'root B done' });
    expect((await fx.rows<{ answer: string }>('SELECT answer FROM questions WHERE id = $1', [qa.id]))[0]!.answer).toBe('staging first');

    for (const root of [a, b]) {
      // Every note reached a turn: a late plan note at the latest with the turn the answer woke.
      const late = await fx.rows<{ kind: string; consumed_turn: number | null }>('SELECT kind, consumed_turn FROM task_notes WHERE task_id = $1 AND (consumed_turn IS NULL OR consumed_turn > 1)', [root.taskId]);
      for (const n of late) expect(n).toMatchObject({ kind: expect.stringMatching(/^(plan|answer)$/), consumed_turn: 2 });
      expect(await fx.store.verifyLedger(root.caseId)).toMatchObject({ ok: true });
      const kinds = (await fx.rows<{ kind: string }>('SELECT kind FROM ledger WHERE case_id = $1 ORDER BY seq', [root.caseId])).map((r) => r.kind);
      expect(kinds).toContain('plan_confirmed');
      expect(kinds).toContain('question_asked');
      expect(kinds).toContain('question_answered');
      // Every task's checkpoints are contiguous: none skipped.
      for (const t of await fx.rows<{ id: string }>('SELECT id FROM tasks WHERE case_id = $1', [root.caseId])) {
        const turns = (await fx.rows<{ turn: number }>('SELECT turn FROM turn_checkpoints WHERE task_id = $1 ORDER BY turn', [t.id])).map((r) => r.turn);
        expect(turns).toEqual(Array.from({ length: turns.length }, (_, i) => i + 1));
      }
    }
  });
});
