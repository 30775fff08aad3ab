/**
 * Issue 4 gaps, on real worker processes (scripted models, Postgres, RabbitMQ):
 * - a child's narrowed execution context: the papers the spawn names that the parent may read,
 *   the parent's grants ∩ those asked for; a child reading any other paper of the case is
 *   refused and the refusal is in the ledger (seed 004 §3);
 * - a child's question goes to its parent, never to a human; the parent (the root) cannot
 *   decide and asks the human its own question; once answered, it answers each child, and each
 *   answer reaches exactly the child that asked (§11.3, §11.4).
 * The scripts name ids the runtime allocates (result refs, question ids), so the test rewrites
 * them once it knows them and reloads the worker's config (SIGHUP) before the step runs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readinessBudgetMs } from '@everdict/testkit';
import { call, eventually, say, testConfig, turnsFixture, type ScriptStep, type TurnsFixture, type WorkerProc } from './helpers.js';

const Q0 = { gap: 'is the report current', checked: 'its date', dependsOn: 'everything', alternatives: ['yes', 'no'], decisionNeeded: 'confirm the report' };
const Q1 = { gap: 'the helpers ask which account to use', checked: 'both accounts exist', dependsOn: 'the credit', alternatives: ['main', 'staging'], decisionNeeded: 'choose per helper' };
const HELPER_Q = { gap: 'which account', checked: 'the report', dependsOn: 'my summary', alternatives: ['main', 'staging'], decisionNeeded: 'choose the account' };
const PLACEHOLDER = say('placeholder: rewritten before this step runs');

describe('narrowed child context and the question relay across processes', () => {
  let fx: TurnsFixture;
  let w: WorkerProc;
  beforeAll(async () => {
    fx = await turnsFixture(
      'turns_relay',
      testConfig({
        routes: { lead: 'lead.json', helper: 'helper.json' },
        tools: {
          report: { builtin: 'static', description: 'Read the long report.', output: 'REPORT '.repeat(2000) },
          notes: { builtin: 'static', description: 'Read the private notes.', output: 'NOTES '.repeat(2000) },
        },
        profiles: {
          lead: { version: '1', route: 'lead', prompt: 'You lead the case.', tools: ['report', 'notes'], childProfile: 'helper' },
          helper: { version: '1', route: 'helper', prompt: 'You help the lead.', tools: ['report', 'notes'] },
        },
        caseTypes: { ticket: { rootProfile: 'lead', scope: { reads: 'all', writes: [], forbidden: [] }, initialGrants: ['read:logs', 'read:db'] } },
      }),
    );
    fx.writeScript('lead', lead([PLACEHOLDER, PLACEHOLDER]));
    fx.writeScript('helper', [PLACEHOLDER]);
    w = await fx.worker('relay', { LOG_LEVEL: 'info' });
  }, 30_000 + readinessBudgetMs()); // the fixture, then one worker to readiness
  afterAll(async () => fx?.close());

  function lead([spawns, answers]: [ScriptStep, ScriptStep]): ScriptStep[] {
    return [
      call(['report', {}], ['notes', {}]), // two large results, stored as papers of the root
      call(['wait', { for: 'question', reason: 'check first', question: Q0 }]),
      spawns,
      call(['wait', { for: 'question', reason: 'cannot decide for them', question: Q1 }]), // the root escalates to a human
      answers,
      say('all done'),
    ];
  }

  const task = async (id: string) => (await fx.rows<{ state: string; park_reason: string | null; park_detail: Record<string, string> | null; context: Record<string, unknown> | null }>('SELECT state, park_reason, park_detail, context FROM tasks WHERE id = $1', [id]))[0]!;
  const logs = () => w.output().slice(-4000);
  const until = (what: string, fn: () => Promise<boolean>) =>
    eventually(fn, { timeoutMs: 30_000, what }).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${logs()}`);
    });
  const reload = async () => {
    const reloads = w.output().split('fleet config reloaded').length;
    fx.writeConfig(fx.config);
    w.signal('SIGHUP');
    await until('config reloaded', async () => w.output().split('fleet config reloaded').length > reloads);
  };
  const openQuestion = async (caseId: string) => (await fx.rows<{ id: string; task_id: string }>('SELECT id, task_id FROM questions WHERE case_id = $1 AND answer IS NULL', [caseId]))[0];
  const ledger = async (caseId: string, kind: string) => (await fx.rows<{ body: Record<string, unknown> }>('SELECT body FROM ledger WHERE case_id = $1 AND kind = $2 ORDER BY seq', [caseId, kind])).map((r) => r.body);

  it('gives each child only the papers and grants its parent holds and it asked for, and relays its question to the parent', async () => {
    const { caseId, taskId: root } = await fx.openCase('ticket', 'look into it');
    await until('root asked its first question', async () => (await task(root)).park_reason === 'question');

    // The root's stored results, as refs it can hand on.
    const stored = await fx.rows<{ name: string; report: boolean }>(
      `SELECT p.name, convert_from(r.bytes, 'UTF8') LIKE 'REPORT%' AS report FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
        WHERE p.case_id = $1 AND p.name LIKE $2`,
      [caseId, `results/${root}/%`],
    );
    expect(stored).toHaveLength(2);
    const refOf = (report: boolean) => stored.find((s) => s.report === report)!.name.split('/').slice(2).join('/');
    const [report, notes] = [refOf(true), refOf(false)];

    fx.writeScript('lead', lead([call(['spawn', { objective: 'summarise the report', papers: [report], grants: ['read:logs', 'write:prod'] }], ['spawn', { objective: 'give a second opinion' }]), PLACEHOLDER]));
    fx.writeScript('helper', [
      call(['read_tool_result', { ref: report, limit: 40 }], ['read_tool_result', { ref: notes, limit: 40 }]),
      call(['wait', { for: 'question', reason: 'need the account', question: HELPER_Q }]),
      say('helper done'),
    ]);
    await reload();
    await fx.sendAs('question.answered', caseId, { questionId: (await openQuestion(caseId))!.id, taskId: root, answer: 'yes, current', answeredBy: 'alice' });

    // Both children ask; their questions reach the root, which asks a human its own question.
    const children = async () => fx.rows<{ id: string; objective: { text: string } }>('SELECT id, objective FROM tasks WHERE parent_id = $1', [root]);
    await until('both children parked on their questions', async () => {
      const c = await children();
      return c.length === 2 && (await Promise.all(c.map(async (k) => (await task(k.id)).park_reason === 'question'))).every(Boolean);
    });
    await until('root escalated to a human', async () => (await task(root)).park_reason === 'question' && (await openQuestion(caseId)) !== undefined);
    const kids = await children();
    const summariser = kids.find((k) => k.objective.text === 'summarise the report')!.id;
    const second = kids.find((k) => k.objective.text === 'give a second opinion')!.id;

    // Item 1: the narrowed context — the named paper and the held grant; nothing by default.
    expect((await task(summariser)).context).toMatchObject({ tools: ['report', 'notes'], permittedPapers: [`results/${root}/${report}`], grants: ['read:logs'] });
    expect((await task(second)).context).toMatchObject({ permittedPapers: [], grants: [] });
    const placed = await ledger(caseId, 'child_placed');
    expect(placed.find((b) => b['childTaskId'] === summariser)).toMatchObject({ withheld: { papers: [], grants: ['write:prod'] } });
    // Reads: the permitted paper pages back; every other paper of the case is refused and recorded.
    const reads = await fx.rows<{ task_id: string; text: string }>(
      `SELECT c.task_id, convert_from(r.bytes, 'UTF8') AS text FROM runtime_calls c JOIN paper_revisions r ON r.paper_id = c.response_paper_id
        WHERE c.task_id = ANY($1::uuid[]) AND c.tool_name = 'read_tool_result' ORDER BY c.task_id, c.ordinal`,
      [[summariser, second]],
    );
    const readsOf = (id: string) => reads.filter((r) => r.task_id === id).map((r) => (JSON.parse(r.text) as { content: string; outcome: string }).outcome);
    expect(readsOf(summariser)).toEqual(['ok', 'tool_error']);
    expect(readsOf(second)).toEqual(['tool_error', 'tool_error']);
    expect(reads.find((r) => r.task_id === summariser)!.text).toContain('REPORT REPORT');
    const refused = await ledger(caseId, 'paper_read_refused');
    expect(refused.map((b) => `${b['taskId'] === summariser ? 'summariser' : 'second'}:${b['paper'] === `results/${root}/${report}` ? 'report' : 'notes'}`).sort()).toEqual(['second:notes', 'second:report', 'summariser:notes']);

    // Item 2: no child asked a human; each question went to the root as a note.
    const humanQuestions = await fx.rows<{ task_id: string; asked_by: string; gap: string }>('SELECT task_id, asked_by, gap FROM questions WHERE case_id = $1 ORDER BY created_at', [caseId]);
    expect(humanQuestions).toEqual([
      { task_id: root, asked_by: root, gap: Q0.gap },
      { task_id: root, asked_by: root, gap: Q1.gap },
    ]);
    const childQuestion = async (id: string) => (await task(id)).park_detail!;
    const [q1, q2] = [await childQuestion(summariser), await childQuestion(second)];
    expect(q1).toMatchObject({ askedOf: root });
    expect(q2).toMatchObject({ askedOf: root });
    const rootNotes = await fx.rows<{ body: { questionId: string; childTaskId: string; gap: string } }>("SELECT body FROM task_notes WHERE task_id = $1 AND kind = 'question' ORDER BY seq", [root]);
    expect(rootNotes.map((n) => [n.body.childTaskId, n.body.questionId, n.body.gap]).sort()).toEqual(
      [
        [summariser, q1['questionId'], HELPER_Q.gap],
        [second, q2['questionId'], HELPER_Q.gap],
      ].sort(),
    );

    // The root gets its human answer and answers each child differently (plus one bogus id).
    const bogus = '01900000-0000-7000-8000-00000000dead';
    fx.writeScript('lead', lead([PLACEHOLDER, PLACEHOLDER]).map((s, i) =>
      i === 2
        ? call(['spawn', { objective: 'summarise the report', papers: [report], grants: ['read:logs', 'write:prod'] }], ['spawn', { objective: 'give a second opinion' }])
        : i === 4
          ? call(['wait', { for: 'children', reason: 'answered them', answers: [
              { questionId: q1['questionId'], answer: 'use main' },
              { questionId: q2['questionId'], answer: 'use staging' },
              { questionId: bogus, answer: 'nobody asked' },
            ] }])
          : s,
    ));
    await reload();
    const q = (await openQuestion(caseId))!;
    expect(q.task_id).toBe(root);
    await fx.sendAs('question.answered', caseId, { questionId: q.id, taskId: root, answer: 'main for the summary, staging for the opinion', answeredBy: 'alice' });
    await until('root done', async () => (await task(root)).state === 'done');

    for (const [id, want, qid] of [
      [summariser, 'use main', q1['questionId']],
      [second, 'use staging', q2['questionId']],
    ] as const) {
      expect((await task(id)).state).toBe('done');
      const answers = await fx.rows<{ body: { questionId: string; answer: string; answeredBy: string } }>("SELECT body FROM task_notes WHERE task_id = $1 AND kind = 'answer'", [id]);
      expect(answers.map((a) => a.body)).toEqual([{ questionId: qid, answer: want, answeredBy: `task:${root}` }]);
    }
    expect((await ledger(caseId, 'question_raised')).map((b) => b['askedOf'])).toEqual([root, root]);
    expect((await ledger(caseId, 'question_answer_sent')).map((b) => b['childTaskId']).sort()).toEqual([summariser, second].sort());
    expect(await ledger(caseId, 'question_answer_refused')).toEqual([{ taskId: root, questionId: bogus, why: 'no sub-agent of this task waits on that question' }]);
    expect((await ledger(caseId, 'question_answered')).filter((b) => b['answeredBy'] === `task:${root}`).map((b) => b['taskId']).sort()).toEqual([summariser, second].sort());
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });
});
