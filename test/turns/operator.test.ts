/**
 * An operator's way back, end to end on real worker processes (scripted models, Postgres,
 * RabbitMQ), through the intake HTTP API and the `everdict` CLI:
 * - a soft cancel parks the task at its next checkpoint; `everdict resume` (POST
 *   /v1/cases/:id/resume, role operator) lifts the soft stop and the task goes on to done; a hard
 *   cancel is the other way out, and a hard stop cannot be resumed (§7);
 * - a task parked `budget` wakes on `everdict top-up` (POST /v1/cases/:id/top-up, role operator,
 *   `budget.topped_up`) and finishes (§11.4).
 */
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '@everdict/contracts';
import { readinessBudgetMs } from '@everdict/testkit';
import { REPO, call, eventually, say, testConfig, turnsFixture, type TurnsFixture, type WorkerProc, serveIntakeApi } from './helpers.js';

const TOKENS = { olga: 'operator-olga-token-resume', acme: 'customer-acme-token-resume' } as const;
const QUESTION = { gap: 'g', checked: 'c', dependsOn: 'd', alternatives: ['x'], decisionNeeded: 'pick' };

describe('resume after a soft stop, and budget top-ups, from the operator surface', () => {
  let fx: TurnsFixture;
  let w: WorkerProc;
  let closeApi: (() => Promise<void>) | undefined;
  let url: string;
  beforeAll(async () => {
    const config = testConfig({
      routes: { steady: 'steady.json', long: 'long.json' },
      profiles: {
        steady: { version: '1', route: 'steady', prompt: 'You work steadily.', tools: ['lookup'] },
        worker: { version: '1', route: 'long', prompt: 'You read every page.', tools: ['lookup'] },
      },
      caseTypes: {
        ticket: { rootProfile: 'steady', scope: { reads: 'all', writes: [], forbidden: [] } },
        budgeted: { rootProfile: 'worker', scope: { reads: 'all', writes: [], forbidden: [] }, budget: { maxTurns: 2 } },
      },
    });
    config.principals = {
      olga: { tokenHash: `sha256:${sha256Hex(TOKENS.olga)}`, roles: ['operator'] },
      acme: { tokenHash: `sha256:${sha256Hex(TOKENS.acme)}`, roles: ['customer'], customers: ['acme'] },
    };
    fx = await turnsFixture('turns_operator', config);
    // Parks on a question; once answered, one more checkpoint (where a soft stop takes hold), then done.
    fx.writeScript('steady', [call(['wait', { for: 'question', reason: 'hold', question: QUESTION }]), call(['lookup', { q: 'x' }]), say('steady done')]);
    fx.writeScript('long', [call(['lookup', { page: 1 }]), call(['lookup', { page: 2 }]), call(['lookup', { page: 3 }]), say('all pages read')]);
    w = await fx.worker('ops');
    // The intake API in this process, on the same database; the worker's relay publishes what it enqueues.
    ({ url, close: closeApi } = await serveIntakeApi(fx));
  }, 30_000 + readinessBudgetMs()); // the fixture, then one worker to readiness
  afterAll(async () => {
    await closeApi?.();
    await fx?.close();
  });

  const task = async (id: string) => (await fx.rows<{ state: string; park_reason: string | null; park_detail: Record<string, unknown> | null; cancel_requested: string | null }>('SELECT state, park_reason, park_detail, cancel_requested FROM tasks WHERE id = $1', [id]))[0]!;
  const until = (what: string, fn: () => Promise<boolean>) =>
    eventually(fn, { timeoutMs: 30_000, what }).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${w.output().slice(-4000)}`);
    });
  const post = async (path: string, token: string, body: unknown) => {
    const r = await fetch(`${url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: r.status, body: (await r.json()) as Record<string, unknown> };
  };
  const everdict = (token: string, ...args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((done) => {
      execFile(process.execPath, ['--conditions=source', '--import', 'tsx', 'cli/src/main.ts', ...args], { cwd: REPO, env: { ...process.env, EVERDICT_URL: url, EVERDICT_TOKEN: token }, timeout: 60_000 }, (err, stdout, stderr) =>
        done({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
  const kinds = async (caseId: string) => (await fx.rows<{ kind: string }>('SELECT kind FROM ledger WHERE case_id = $1 ORDER BY seq', [caseId])).map((r) => r.kind);

  /** A case whose root is parked on its soft stop (after the question it first waited on). */
  async function softStopped(): Promise<{ caseId: string; taskId: string }> {
    const c = await fx.openCase('ticket', 'work steadily');
    await until('parked on its question', async () => (await task(c.taskId)).park_reason === 'question');
    expect((await post(`/v1/cases/${c.caseId}/cancel`, TOKENS.acme, { mode: 'soft' })).status).toBe(202);
    await until('soft cancel requested', async () => (await task(c.taskId)).cancel_requested === 'soft');
    const q = (await fx.rows<{ id: string }>('SELECT id FROM questions WHERE task_id = $1 AND answer IS NULL', [c.taskId]))[0]!;
    await fx.sendAs('question.answered', c.caseId, { questionId: q.id, taskId: c.taskId, answer: 'x', answeredBy: 'alice' });
    await until('parked at the next checkpoint on its soft stop', async () => (await task(c.taskId)).park_detail?.['kind'] === 'soft_cancel');
    return c;
  }

  it('`everdict resume` lifts a soft stop and the task goes on to done; a hard cancel ends it instead and is final', async () => {
    const c = await softStopped();
    expect(await task(c.taskId)).toMatchObject({ state: 'parked', park_reason: 'gate', cancel_requested: 'soft' });
    // Only an operator resumes.
    const denied = await post(`/v1/cases/${c.caseId}/resume`, TOKENS.acme, {});
    expect([denied.status, denied.body['error']]).toEqual([403, 'forbidden']);
    const r = await everdict(TOKENS.olga, 'resume', c.caseId, '--reason', 'customer confirmed');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`resume requested for case ${c.caseId}`);
    await until('done after the resume', async () => (await task(c.taskId)).state === 'done');
    expect(await task(c.taskId)).toMatchObject({ cancel_requested: null });
    expect((await fx.rows<{ stop_mode: string | null }>('SELECT stop_mode FROM cases WHERE id = $1', [c.caseId]))[0]!.stop_mode).toBeNull();
    const k = await kinds(c.caseId);
    expect(k.indexOf('case_resume_requested')).toBeGreaterThan(-1);
    expect(k.indexOf('task_resumed')).toBeGreaterThan(k.indexOf('case_resume_requested'));
    expect(await fx.store.verifyLedger(c.caseId)).toMatchObject({ ok: true });

    // The other way out: a hard cancel finishes a soft-stopped task, and a hard stop cannot be resumed.
    const h = await softStopped();
    expect((await post(`/v1/cases/${h.caseId}/cancel`, TOKENS.olga, { mode: 'hard' })).status).toBe(202);
    await until('cancelled', async () => (await task(h.taskId)).state === 'cancelled');
    const final = await post(`/v1/cases/${h.caseId}/resume`, TOKENS.olga, {});
    expect([final.status, final.body['error']]).toEqual([409, 'hard_stop']);
    expect((await task(h.taskId)).state).toBe('cancelled');
  });

  it('`everdict top-up` wakes a budget park through budget.topped_up and the task finishes', async () => {
    const { caseId, taskId } = await fx.openCase('budgeted', 'read every page');
    await until('parked budget', async () => (await task(taskId)).park_reason === 'budget');
    const denied = await post(`/v1/cases/${caseId}/top-up`, TOKENS.acme, { budget: { maxTurns: 5 } });
    expect([denied.status, denied.body['error']]).toEqual([403, 'forbidden']);
    const bad = await post(`/v1/cases/${caseId}/top-up`, TOKENS.olga, { budget: { maxTurns: -1 } });
    expect([bad.status, bad.body['field']]).toEqual([400, 'budget.maxTurns']);
    const usage = await everdict(TOKENS.olga, 'top-up', caseId);
    expect(usage.code).toBe(2); // no limit named
    expect((await task(taskId)).park_reason).toBe('budget');

    const r = await everdict(TOKENS.olga, 'top-up', caseId, '--turns', '5', '--reason', 'more pages', '--json');
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ caseId, taskId, budget: { maxTurns: 5 } });
    await until('done after the top-up', async () => (await task(taskId)).state === 'done');
    const msgs = await fx.rows<{ type: string }>("SELECT type FROM outbox_messages WHERE case_id = $1 AND type = 'budget.topped_up'", [caseId]);
    expect(msgs).toHaveLength(1);
    const topped = await fx.rows<{ body: Record<string, unknown> }>("SELECT body FROM ledger WHERE case_id = $1 AND kind = 'budget_topped_up'", [caseId]);
    expect(topped.map((t) => t.body)).toEqual([expect.objectContaining({ taskId, budget: { maxTurns: 5 }, by: 'olga', reason: 'more pages' })]);
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });
});
