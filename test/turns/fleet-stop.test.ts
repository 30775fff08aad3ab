/**
 * The fleet-wide SOFT stop (seed 004 §7), end to end on a real worker process (scripted model,
 * Postgres, RabbitMQ) with the intake HTTP API and the `everdict` CLI:
 * - while it is in force POST /v1/cases answers 503 `fleet_stopped` with the reason (Retry-After);
 * - a running task parks at its next checkpoint, as under its own soft stop (park gate,
 *   soft_cancel), although neither it nor its case was stopped;
 * - `everdict fleet resume` wakes it through `task.resume` and it finishes; new cases open again.
 */
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '@everdict/contracts';
import { readinessBudgetMs } from '@everdict/testkit';
import { REPO, call, eventually, say, testConfig, turnsFixture, type TurnsFixture, type WorkerProc, serveIntakeApi } from './helpers.js';

const TOKENS = { olga: 'operator-olga-token-fleet', acme: 'customer-acme-token-fleet' } as const;
const QUESTION = { gap: 'g', checked: 'c', dependsOn: 'd', alternatives: ['x'], decisionNeeded: 'pick' };

describe('fleet soft stop', () => {
  let fx: TurnsFixture;
  let w: WorkerProc;
  let closeApi: (() => Promise<void>) | undefined;
  let url: string;
  beforeAll(async () => {
    const config = testConfig({
      routes: { steady: 'steady.json' },
      profiles: { steady: { version: '1', route: 'steady', prompt: 'You work steadily.', tools: ['lookup'] } },
      caseTypes: { ticket: { rootProfile: 'steady', scope: { reads: 'all', writes: [], forbidden: [] } } },
    });
    config.principals = {
      olga: { tokenHash: `sha256:${sha256Hex(TOKENS.olga)}`, roles: ['operator'] },
      acme: { tokenHash: `sha256:${sha256Hex(TOKENS.acme)}`, roles: ['customer'], customers: ['acme'] },
    };
    fx = await turnsFixture('turns_fleet_stop', config);
    // Parks on a question (not running while the stop is put in force); once answered, a lookup
    // (the checkpoint where the stop takes hold), then done.
    fx.writeScript('steady', [call(['wait', { for: 'question', reason: 'hold', question: QUESTION }]), call(['lookup', { q: 'x' }]), say('steady done')]);
    w = await fx.worker('fleet');
    ({ url, close: closeApi } = await serveIntakeApi(fx));
  }, 30_000 + readinessBudgetMs());
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
    return { status: r.status, retryAfter: r.headers.get('retry-after'), body: (await r.json()) as Record<string, unknown> };
  };
  const everdict = (token: string, ...args: string[]) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((done) => {
      execFile(process.execPath, ['--conditions=source', '--import', 'tsx', 'cli/src/main.ts', ...args], { cwd: REPO, env: { ...process.env, EVERDICT_URL: url, EVERDICT_TOKEN: token }, timeout: 60_000 }, (err, stdout, stderr) =>
        done({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });

  it('refuses new cases with 503 and the reason, parks running work at its checkpoint, and resume wakes it to done', async () => {
    const c = await fx.openCase('ticket', 'work steadily');
    await until('parked on its question', async () => (await task(c.taskId)).park_reason === 'question');

    const usage = await everdict(TOKENS.olga, 'fleet', 'stop', '--soft');
    expect(usage.code).toBe(2); // no --reason
    const denied = await post('/v1/fleet/stop', TOKENS.acme, { kind: 'soft', reason: 'x' });
    expect([denied.status, denied.body['error']]).toEqual([403, 'forbidden']);
    const stop = await everdict(TOKENS.olga, 'fleet', 'stop', '--soft', '--reason', 'provider migration tonight');
    expect(stop.code, stop.stderr).toBe(0);
    expect(stop.stdout).toContain('stop soft: IN FORCE');

    // No new case, from any principal; the reply says why and when to come back.
    const refused = await post('/v1/cases', TOKENS.acme, { caseType: 'ticket', title: 'during the stop' });
    expect(refused).toMatchObject({ status: 503, retryAfter: '60', body: { error: 'fleet_stopped' } });
    expect(String(refused.body['message'])).toContain('provider migration tonight');
    expect((await fx.rows('SELECT id FROM cases WHERE title = $1', ['during the stop'])).length).toBe(0);

    // The running task parks at its next checkpoint (past the worker's 1 s hint, so it sees it).
    await new Promise((r) => setTimeout(r, 1_200));
    const q = (await fx.rows<{ id: string }>('SELECT id FROM questions WHERE task_id = $1 AND answer IS NULL', [c.taskId]))[0]!;
    // Answers are not new cases: intake still takes them during a soft stop.
    expect((await post(`/v1/questions/${q.id}/answer`, TOKENS.acme, { answer: 'x' })).status).toBe(202);
    await until('parked at the next checkpoint on the fleet stop', async () => (await task(c.taskId)).park_detail?.['kind'] === 'soft_cancel');
    expect(await task(c.taskId)).toMatchObject({ state: 'parked', park_reason: 'gate', cancel_requested: null, park_detail: expect.objectContaining({ fleetStop: true }) });
    expect((await fx.rows<{ stop_mode: string | null }>('SELECT stop_mode FROM cases WHERE id = $1', [c.caseId]))[0]!.stop_mode).toBeNull();
    // It stays parked (no wake while the stop holds).
    await new Promise((r) => setTimeout(r, 1_000));
    expect((await task(c.taskId)).state).toBe('parked');

    const status = await everdict(TOKENS.olga, 'fleet', '--json');
    expect(status.code, status.stderr).toBe(0);
    expect((JSON.parse(status.stdout) as { stops: unknown[] }).stops).toEqual([
      expect.objectContaining({ kind: 'hard', active: false }),
      expect.objectContaining({ kind: 'soft', active: true, changedBy: 'olga', reason: 'provider migration tonight' }),
    ]);

    const resume = await everdict(TOKENS.olga, 'fleet', 'resume', '--soft', '--reason', 'done migrating');
    expect(resume.code, resume.stderr).toBe(0);
    expect(resume.stdout).toContain('lifted: soft');
    expect(resume.stdout).toContain('1 parked task(s) resumed');
    await until('done after the fleet resume', async () => (await task(c.taskId)).state === 'done');
    const kinds = (await fx.rows<{ kind: string }>('SELECT kind FROM ledger WHERE case_id = $1 ORDER BY seq', [c.caseId])).map((r) => r.kind);
    expect(kinds.indexOf('task_resumed')).toBeGreaterThan(kinds.indexOf('case_resume_requested'));
    expect(await fx.store.verifyLedger(c.caseId)).toMatchObject({ ok: true });

    // A second resume has nothing to lift; cases open again.
    const again = await post('/v1/fleet/resume', TOKENS.olga, {});
    expect(again).toMatchObject({ status: 200, body: { lifted: [], resumedTasks: 0 } });
    expect((await post('/v1/cases', TOKENS.acme, { caseType: 'ticket', title: 'after the stop' })).status).toBe(201);
  }, 120_000);
});
