/**
 * Plans are visible (issue 13 item 9), on a real worker process (scripted models, Postgres,
 * RabbitMQ) through the intake case API and `everdict case`: the root's own revisions (recorded,
 * never confirmed), each child's (confirmed by its parent), the current projection of each with
 * the platform's step status — no step `done` because a model planned it.
 */
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '@everdict/contracts';
import { readinessBudgetMs } from '@everdict/testkit';
import { REPO, call, eventually, say, testConfig, turnsFixture, type TurnsFixture, type WorkerProc, serveIntakeApi } from './helpers.js';

const TOKEN = 'operator-olga-token-plans';
const QUESTION = { gap: 'g', checked: 'c', dependsOn: 'd', alternatives: ['x'], decisionNeeded: 'pick' };

interface PlanView {
  taskId: string;
  parentTaskId: string | null;
  root: boolean;
  latestRevision: number;
  confirmedRevision: number | null;
  revisions: { revision: number; steps: { stepId: string; title: string; dependsOn: string[] }[]; confirmation: { by: string | null; at: string } | null }[];
  current: { stepId: string; status: string; revision: number }[];
}

describe('plans in the case view', () => {
  let fx: TurnsFixture;
  let w: WorkerProc;
  let closeApi: (() => Promise<void>) | undefined;
  let url: string;
  beforeAll(async () => {
    const config = testConfig({
      routes: { lead: 'lead.json', helper: 'helper.json' },
      profiles: {
        lead: { version: '1', route: 'lead', prompt: 'You lead the case.', tools: ['lookup'], childProfile: 'helper' },
        helper: { version: '1', route: 'helper', prompt: 'You help the lead.', tools: ['lookup'] },
      },
    });
    config.principals = { olga: { tokenHash: `sha256:${sha256Hex(TOKEN)}`, roles: ['operator'] } };
    fx = await turnsFixture('turns_plans_view', config);
    // The root plans, revises its plan while spawning a helper, then parks on a question.
    fx.writeScript('lead', [
      call(['plan', { steps: [{ id: 'triage', title: 'triage the ticket' }] }]),
      call(['plan', { steps: [{ id: 'triage', title: 'triage the ticket' }, { id: 'fix', title: 'fix it', dependsOn: ['triage'] }] }], ['spawn', { objective: 'check the logs' }]),
      call(['wait', { for: 'question', reason: 'need a decision', question: QUESTION }]),
      say('done'),
    ]);
    fx.writeScript('helper', [call(['plan', { steps: [{ id: 'look', title: 'look at the logs' }, { id: 'report', title: 'report back', dependsOn: ['look'] }] }], ['lookup', { q: 'logs' }]), say('the logs are clean')]);
    w = await fx.worker('plans');
    ({ url, close: closeApi } = await serveIntakeApi(fx));
  }, 30_000 + readinessBudgetMs());
  afterAll(async () => {
    await closeApi?.();
    await fx?.close();
  });

  const view = async (caseId: string) => {
    const r = await fetch(`${url}/v1/cases/${caseId}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(r.status).toBe(200);
    return (await r.json()) as { plans: PlanView[] };
  };

  it('shows the root and child revisions, their confirmations and the current projection', async () => {
    const { caseId, taskId: rootId } = await fx.openCase('ticket', 'fix the ticket');
    const child = await eventually(
      async () => {
        const [c] = await fx.rows<{ id: string; state: string }>('SELECT id, state FROM tasks WHERE parent_id = $1', [rootId]);
        const [root] = await fx.rows<{ park_reason: string | null }>('SELECT park_reason FROM tasks WHERE id = $1', [rootId]);
        const [conf] = await fx.rows('SELECT 1 FROM plan_confirmations WHERE task_id = $1', [c?.id ?? rootId]);
        return c?.state === 'done' && root?.park_reason === 'question' && conf ? c : undefined;
      },
      { timeoutMs: 40_000, what: 'child done, its plan confirmed, root parked on its question' },
    ).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${w.output().slice(-4000)}`);
    });

    const { plans } = await view(caseId);
    const root = plans.find((p) => p.taskId === rootId)!;
    expect(root).toMatchObject({ root: true, parentTaskId: null, latestRevision: 2, confirmedRevision: null, current: [] });
    expect(root.revisions.map((r) => [r.revision, r.steps.map((s) => s.stepId), r.confirmation])).toEqual([
      [1, ['triage'], null],
      [2, ['triage', 'fix'], null],
    ]);
    expect(root.revisions[1]!.steps[1]).toEqual({ stepId: 'fix', title: 'fix it', dependsOn: ['triage'] });

    const kid = plans.find((p) => p.taskId === child.id)!;
    expect(kid).toMatchObject({ root: false, parentTaskId: rootId, latestRevision: 1, confirmedRevision: 1 });
    expect(kid.revisions).toEqual([expect.objectContaining({ revision: 1, confirmation: expect.objectContaining({ by: rootId }) })]);
    // The projection carries the platform's status: planned (and even finished) work is not `done`.
    expect(kid.current.map((s) => [s.stepId, s.status, s.revision])).toEqual([
      ['look', 'pending', 1],
      ['report', 'pending', 1],
    ]);

    const out = await new Promise<{ code: number; stdout: string; stderr: string }>((done) => {
      execFile(process.execPath, ['--conditions=source', '--import', 'tsx', 'cli/src/main.ts', 'case', caseId], { cwd: REPO, env: { ...process.env, EVERDICT_URL: url, EVERDICT_TOKEN: TOKEN }, timeout: 60_000 }, (err, stdout, stderr) =>
        done({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toContain(`${rootId} (root)  revision 2  confirmed none`);
    expect(out.stdout).toMatch(/r2 \S+ {2}unconfirmed {2}triage, fix/);
    expect(out.stdout).toContain(`${child.id} (child of ${rootId})  revision 1  confirmed 1`);
    expect(out.stdout).toContain('[pending] look look at the logs');
  });
});
