/**
 * Acceptance (issue 4) on real worker processes:
 * - a truncated, tampered, missing or substituted (another valid state document) checkpoint paper
 *   parks the case with a restore failure;
 * - budget exhaustion parks `budget` (not done) with its checkpoint published; a top-up wakes it;
 * - swapping a profile's route between two turns changes the adapter of the next model call,
 *   rewrites no task or case row, and the journal shows the route of every call;
 * - a provider that is down parks `provider_down` with a growing backoff, never failing the task;
 * - a hard cancel fences the task.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contentHash } from '@everdict/store';
import { decodeStatePaper } from '@everdict/turn-worker';
import { readinessBudgetMs } from '@everdict/testkit';
import { call, eventually, modelAsks, say, testConfig, turnsFixture, type TurnsFixture, type WorkerProc } from './helpers.js';

const QUESTION = { gap: 'g', checked: 'c', dependsOn: 'd', alternatives: ['x', 'y'], decisionNeeded: 'pick one' };

describe('parking, restore failures, budgets and route swaps', () => {
  let fx: TurnsFixture;
  let w: WorkerProc;
  let modelLog: string;
  beforeAll(async () => {
    fx = await turnsFixture(
      'turns_parking',
      testConfig({
        routes: { main: 'main.json', long: 'long.json', a: 'a.json', b: 'b.json', down: 'down.json', loop: 'loop.json', careful: 'careful.json' },
        profiles: {
          agent: { version: '1', route: 'main', prompt: 'You answer tickets.', tools: ['lookup'] },
          worker: { version: '1', route: 'long', prompt: 'You work through a list.', tools: ['lookup'] },
          swapper: { version: '1', route: 'a', prompt: 'You are served by a route.', tools: ['lookup'] },
          flaky: { version: '1', route: 'down', prompt: 'Your provider is down.', tools: [] },
          compact: { version: '1', route: 'loop', prompt: 'You read forever.', tools: ['lookup'], compaction: { maxMessages: 6, keepRecent: 3 } },
          careful: { version: '1', route: 'careful', prompt: 'Version one of the prompt.', tools: ['lookup'] },
        },
        caseTypes: {
          ticket: { rootProfile: 'agent', scope: { reads: 'all', writes: [], forbidden: [] } },
          budgeted: { rootProfile: 'worker', scope: { reads: 'all', writes: [], forbidden: [] }, budget: { maxTurns: 2 } },
          swap: { rootProfile: 'swapper', scope: { reads: 'all', writes: [], forbidden: [] } },
          flaky: { rootProfile: 'flaky', scope: { reads: 'all', writes: [], forbidden: [] } },
          compacting: { rootProfile: 'compact', scope: { reads: 'all', writes: [], forbidden: [] }, budget: { maxTurns: 6 } },
          careful: { rootProfile: 'careful', scope: { reads: 'all', writes: [], forbidden: [] } },
          list: { rootProfile: 'worker', scope: { reads: 'all', writes: [], forbidden: [] } },
        },
        // A short activation cap: long runs are released and claimed again between turns.
        runtime: { leaseTtlMs: 1500, sweepIntervalMs: 150, providerBackoffMs: { initial: 300, max: 2000 }, turnsPerActivation: 3 },
      }),
    );
    fx.writeScript('main', [call(['lookup', { q: 'x' }]), call(['wait', { for: 'question', reason: 'need a decision', question: QUESTION }]), say('done')]);
    fx.writeScript('long', [call(['lookup', { page: 1 }]), call(['lookup', { page: 2 }]), call(['lookup', { page: 3 }]), say('all pages read')]);
    fx.writeScript('a', [call(['wait', { for: 'question', reason: 'hold on', question: QUESTION }]), say('served by route a')]);
    fx.writeScript('b', [say('b was not asked first'), say('served by route b')]);
    fx.writeScript('down', [{ error: { kind: 'provider_down', status: 503 } }]);
    fx.writeScript('loop', Array.from({ length: 12 }, (_, i) => call(['todo', { items: [{ id: 'keep', text: 'still open', status: 'pending' }] }], ['lookup', { page: i }])));
    fx.writeScript('careful', [call(['wait', { for: 'question', reason: 'hold on', question: QUESTION }]), say('continued under the new prompt')]);
    modelLog = join(fx.dir, 'model.log');
    w = await fx.worker('park', { EVERDICT_MODEL_LOG: modelLog, LOG_LEVEL: 'info' });
  }, 30_000 + readinessBudgetMs()); // the fixture, then one worker to readiness
  afterAll(async () => fx?.close());

  const task = async (id: string) =>
    (await fx.rows<{ state: string; park_reason: string | null; park_detail: Record<string, unknown> | null; fence_epoch: number }>('SELECT state, park_reason, park_detail, fence_epoch FROM tasks WHERE id = $1', [id]))[0]!;
  const parkedOn = (id: string, reason: string) => eventually(async () => (await task(id)).park_reason === reason, { timeoutMs: 20_000, what: `task parked ${reason}` });
  const questionOf = async (caseId: string) => (await fx.rows<{ id: string }>('SELECT id FROM questions WHERE case_id = $1 AND answer IS NULL', [caseId]))[0]!.id;

  /** Opens a case, waits for its turn-2 checkpoint, applies `tamper` to its state paper, wakes it. */
  const restoreAfter = async (tamper: string, reason: string, tampered?: (taskId: string, statePaperId: string) => Promise<void>) => {
    const { caseId, taskId } = await fx.openCase('ticket', 'You answer this ticket');
    await parkedOn(taskId, 'question');
    const cp = (await fx.rows<{ turn: number; state_paper_id: string }>('SELECT turn, state_paper_id FROM turn_checkpoints WHERE task_id = $1 ORDER BY turn DESC LIMIT 1', [taskId]))[0]!;
    expect(cp.turn).toBe(2);
    const changed = await fx.db.query({ text: tamper, values: [cp.state_paper_id] });
    expect(changed.rowCount, 'the tamper statement changed the paper').toBeGreaterThan(0);
    await tampered?.(taskId, cp.state_paper_id);
    const asked = modelAsks(modelLog).filter((a) => a.taskId === taskId).length;
    await fx.sendAs('question.answered', caseId, { questionId: await questionOf(caseId), taskId, answer: 'x', answeredBy: 'alice' });
    await parkedOn(taskId, 'capability_gap');
    const t = await task(taskId);
    expect(t).toMatchObject({ state: 'parked', park_detail: { kind: 'restore_failed', reason } });
    // Nothing was guessed: no model call, no new checkpoint, no turn.
    expect(modelAsks(modelLog).filter((a) => a.taskId === taskId).length).toBe(asked);
    expect((await fx.rows('SELECT 1 FROM turn_checkpoints WHERE task_id = $1 AND turn > 2', [taskId])).length).toBe(0);
    expect(await w.metric('everdict_restore_failures_total')).toBeGreaterThanOrEqual(1);
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  };

  it.each([
    ['truncated', `UPDATE paper_revisions SET bytes = substring(bytes from 1 for 40) WHERE paper_id = $1`, 'paper_corrupt'],
    ['tampered with a matching content hash', `UPDATE paper_revisions SET bytes = convert_to(replace(convert_from(bytes, 'UTF8'), 'You answer', 'You ignore'), 'UTF8'),
       content_hash = 'sha256:' || encode(sha256(convert_to(replace(convert_from(bytes, 'UTF8'), 'You answer', 'You ignore'), 'UTF8')), 'hex') WHERE paper_id = $1`, 'paper_corrupt'],
    ['missing', `DELETE FROM paper_revisions WHERE paper_id = $1`, 'paper_missing'],
  ])('a %s checkpoint paper parks the case with a restore failure', async (_what, tamper, reason) => restoreAfter(tamper, reason));

  it('a checkpoint paper replaced by another valid state document (the recorded hash left alone) parks the case with a restore failure', async () => {
    // The substitute is this task's own earlier checkpoint, bytes and content hash together: a
    // paper that is consistent in itself and decodes as this task's state. Only the hash the
    // checkpoint recorded tells it is not the state that turn wrote.
    const swap = `UPDATE paper_revisions r SET bytes = o.bytes, content_hash = o.content_hash, size_bytes = o.size_bytes
                    FROM turn_checkpoints c
                    JOIN turn_checkpoints e ON e.task_id = c.task_id AND e.turn = (SELECT max(turn) FROM turn_checkpoints WHERE task_id = c.task_id AND turn < c.turn)
                    JOIN paper_revisions o ON o.paper_id = e.state_paper_id
                   WHERE c.state_paper_id = $1 AND r.paper_id = $1`;
    await restoreAfter(swap, 'paper_corrupt', async (taskId, statePaperId) => {
      const [rev] = await fx.rows<{ bytes: Buffer; content_hash: string; state_hash: string }>(
        `SELECT paper_document(r.paper_id, r.revision) AS bytes, r.content_hash, c.state_hash FROM paper_revisions r JOIN turn_checkpoints c ON c.state_paper_id = r.paper_id WHERE r.paper_id = $1`,
        [statePaperId],
      );
      expect(rev!.content_hash).toBe(contentHash(rev!.bytes));
      expect(rev!.content_hash).not.toBe(rev!.state_hash);
      const { doc } = decodeStatePaper(rev!.bytes, taskId, statePaperId);
      expect(doc.turn).toBeLessThan(2);
    });
  });

  it('budget exhaustion parks `budget` with its checkpoint published; a top-up wakes it', async () => {
    const { caseId, taskId } = await fx.openCase('budgeted', 'read every page');
    await parkedOn(taskId, 'budget');
    const t = await task(taskId);
    expect(t.state).toBe('parked');
    expect(t.park_detail).toMatchObject({ handoff: 'published', cause: 'budget_exhausted', dimension: 'turns' });
    // The published checkpoint is the one a successor resumes from: turn 2, not settled as completed.
    const cp = (await fx.rows<{ turn: number; state_hash: string; bytes: Buffer }>(
      `SELECT k.turn, k.state_hash, paper_document(r.paper_id, r.revision) AS bytes FROM turn_checkpoints k JOIN paper_revisions r ON r.paper_id = k.state_paper_id WHERE k.task_id = $1 ORDER BY k.turn DESC LIMIT 1`,
      [taskId],
    ))[0]!;
    expect(cp.turn).toBe(2);
    const doc = JSON.parse(cp.bytes.toString('utf8')) as { phase: string; run: { usage: { turns: number }; settlement: unknown } };
    expect(doc.phase).toBe('ready');
    expect(doc.run.usage.turns).toBe(2);
    await fx.sendAs('budget.topped_up', caseId, { taskId, budget: { maxTurns: 5 }, toppedUpBy: 'ops' });
    await eventually(async () => (await task(taskId)).state === 'done', { timeoutMs: 20_000, what: 'done after the top-up' });
    expect((await fx.rows('SELECT 1 FROM turn_checkpoints WHERE task_id = $1', [taskId])).length).toBe(4);
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });

  it('a route swap between two turns changes the next call’s adapter and rewrites no task or case row', async () => {
    const { caseId, taskId } = await fx.openCase('swap', 'be served');
    await parkedOn(taskId, 'question');
    const rowOf = async () => (await fx.rows('SELECT id, case_id, parent_id, profile, profile_version, objective, context, root_task_id, depth FROM tasks WHERE id = $1', [taskId]))[0];
    // The lifecycle columns follow the task (parked → running → resolved, §11.1); the rest must not move.
    const caseRow = async () => (await fx.rows('SELECT * FROM cases WHERE id = $1', [caseId])).map(({ state: _s, state_reason: _r, state_since: _t, row_version: _v, updated_at: _u, ...rest }) => rest)[0];
    const [taskBefore, caseBefore] = [await rowOf(), await caseRow()];

    // A broken file is refused with its field named; the process stays up on the old config.
    const good = structuredClone(fx.config);
    const broken = structuredClone(fx.config);
    broken.profiles.swapper!.route = 'nowhere';
    fx.writeConfig(broken);
    w.signal('SIGHUP');
    await eventually(() => w.output().includes('fleet config reload refused'), { what: 'reload refused' });
    expect(w.output()).toMatch(/"path":"\/profiles\/swapper\/route","message":"names route \\"nowhere\\"/);
    expect(await w.metric('everdict_config_reloads_total', { outcome: 'refused' })).toBeGreaterThanOrEqual(1);
    fx.writeConfig(good);

    const swapped = structuredClone(fx.config);
    swapped.profiles.swapper!.route = 'b';
    const reloads = w.output().split('fleet config reloaded').length;
    fx.writeConfig(swapped);
    w.signal('SIGHUP');
    await eventually(() => w.output().split('fleet config reloaded').length > reloads, { what: 'config reloaded' });

    await fx.sendAs('question.answered', caseId, { questionId: await questionOf(caseId), taskId, answer: 'go on', answeredBy: 'alice' });
    await eventually(async () => (await task(taskId)).state === 'done', { timeoutMs: 20_000, what: 'done after the swap' });

    const calls = await fx.rows<{ turn: number; route: string; versions: { route: string } }>("SELECT turn, route, versions FROM runtime_calls WHERE task_id = $1 AND kind = 'model' ORDER BY turn", [taskId]);
    expect(calls.map((c) => [c.turn, c.route])).toEqual([
      [0, 'a'],
      [1, 'b'],
    ]);
    expect(modelAsks(modelLog).filter((a) => a.taskId === taskId).map((a) => a.route)).toEqual(['a', 'b']);
    const answer = (await fx.rows<{ bytes: Buffer }>(
      `SELECT r.bytes FROM runtime_calls c JOIN paper_revisions r ON r.paper_id = c.response_paper_id WHERE c.task_id = $1 AND c.turn = 1 AND c.ordinal = 0`,
      [taskId],
    ))[0]!;
    expect(JSON.parse(answer.bytes.toString('utf8')).output.text).toBe('served by route b');
    // The swap continued under a recorded decision; no task or case row was rewritten for it.
    const decided = await fx.rows<{ body: { changed: string[]; decision: string } }>("SELECT body FROM ledger WHERE case_id = $1 AND kind = 'versions_changed'", [caseId]);
    expect(decided.map((d) => [d.body.changed, d.body.decision])).toEqual([[['route'], 'continue']]);
    expect(await rowOf()).toEqual(taskBefore);
    expect(await caseRow()).toEqual(caseBefore);
  });

  it('a provider that is down parks provider_down with a growing backoff and never fails the task', async () => {
    const { taskId } = await fx.openCase('flaky', 'ask a provider that is down');
    await eventually(async () => Number((await task(taskId)).park_detail?.attempt ?? 0) >= 2, { timeoutMs: 20_000, what: 'second provider_down park' });
    const t = await task(taskId);
    expect(t).toMatchObject({ state: 'parked', park_reason: 'provider_down', park_detail: { route: 'down', handoff: 'published' } });
    const failed = await fx.rows<{ status: string; outcome_class: string }>('SELECT status, outcome_class FROM runtime_calls WHERE task_id = $1', [taskId]);
    expect(failed).toEqual([{ status: 'failed', outcome_class: 'provider_down' }]);
  });

  it('compaction replaces earlier messages by a derived summary paper that keeps pending work', async () => {
    const { taskId } = await fx.openCase('compacting', 'read and read');
    await parkedOn(taskId, 'budget');
    const summary = await fx.rows<{ head_revision: number; bytes: Buffer }>(
      `SELECT p.head_revision, r.bytes FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE p.name = $1`,
      [`tasks/${taskId}/summary`],
    );
    expect(summary).toHaveLength(1);
    expect(summary[0]!.head_revision).toBeGreaterThanOrEqual(2); // a new revision each time, never an edit
    const doc = JSON.parse(summary[0]!.bytes.toString('utf8')) as { pending: { todos: { id: string }[] }; previous: unknown };
    expect(doc.pending.todos.map((t) => t.id)).toEqual(['keep']);
    expect(doc.previous).not.toBeNull();
    const state = (await fx.rows<{ bytes: Buffer }>(
      `SELECT paper_document(r.paper_id, r.revision) AS bytes FROM turn_checkpoints k JOIN paper_revisions r ON r.paper_id = k.state_paper_id WHERE k.task_id = $1 ORDER BY k.turn DESC LIMIT 1`,
      [taskId],
    ))[0]!;
    const restored = JSON.parse(state.bytes.toString('utf8')) as { summary: { revision: number }; chat: { role: string; content: string }[]; run: { todos: { id: string }[] } };
    expect(restored.chat.length).toBeLessThanOrEqual(7);
    expect(restored.chat[0]!.content).toMatch(/^Summary of earlier work \(paper /);
    expect(restored.summary.revision).toBe(summary[0]!.head_revision);
    expect(restored.run.todos.map((t) => t.id)).toEqual(['keep']);
    // Six turns under a cap of three per activation: released once and claimed again.
    const epochs = await fx.rows<{ fence_epoch: number }>('SELECT DISTINCT fence_epoch FROM turn_checkpoints WHERE task_id = $1 ORDER BY fence_epoch', [taskId]);
    expect(epochs.map((e) => e.fence_epoch)).toEqual([1, 2]);
  });

  it('a task released at its activation cap goes on, on this worker, from the state it holds: its checkpoint is not read back', async () => {
    const held = await w.metric('everdict_task_restores_total', { from: 'held' });
    const { caseId, taskId } = await fx.openCase('list', 'work through the list');
    await eventually(async () => (await task(taskId)).state === 'done', { timeoutMs: 20_000, what: 'the list worked through' });
    // Four turns under a cap of three: released once, claimed again, continued from the held state.
    const cps = await fx.rows<{ turn: number; fence_epoch: number }>('SELECT turn, fence_epoch FROM turn_checkpoints WHERE task_id = $1 ORDER BY turn', [taskId]);
    expect(cps.map((c) => [c.turn, c.fence_epoch])).toEqual([[1, 1], [2, 1], [3, 1], [4, 2]]);
    expect(await w.metric('everdict_task_restores_total', { from: 'held' })).toBeGreaterThanOrEqual(held + 1);
    // The run went on from exactly that state: the last checkpoint holds the whole conversation.
    const last = (await fx.rows<{ bytes: Buffer }>(
      `SELECT paper_document(r.paper_id, r.revision) AS bytes FROM turn_checkpoints k JOIN paper_revisions r ON r.paper_id = k.state_paper_id WHERE k.task_id = $1 AND k.turn = 4`,
      [taskId],
    ))[0]!;
    const chat = (JSON.parse(last.bytes.toString('utf8')) as { chat: { role: string; content: string }[] }).chat;
    expect(chat.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'tool', 'assistant', 'tool', 'assistant']);
    expect(chat.at(-1)!.content).toBe('all pages read');
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  });

  it('a changed prompt parks the task for an operator; "continue" resumes it under a recorded decision', async () => {
    const { caseId, taskId } = await fx.openCase('careful', 'be careful');
    await parkedOn(taskId, 'question');
    const changed = structuredClone(fx.config);
    changed.profiles.careful!.prompt = 'Version two of the prompt.';
    const reloads = w.output().split('fleet config reloaded').length;
    fx.writeConfig(changed);
    w.signal('SIGHUP');
    await eventually(() => w.output().split('fleet config reloaded').length > reloads, { what: 'config reloaded' });
    await fx.sendAs('question.answered', caseId, { questionId: await questionOf(caseId), taskId, answer: 'go', answeredBy: 'alice' });
    await eventually(async () => (await task(taskId)).park_detail?.kind === 'versions', { timeoutMs: 20_000, what: 'parked for the versions decision' });
    expect(await task(taskId)).toMatchObject({ state: 'parked', park_reason: 'question', park_detail: { changed: ['profile', 'prompt'].filter((f) => f === 'prompt') } });
    const q = (await fx.rows<{ id: string; kind: string }>("SELECT id, kind FROM questions WHERE case_id = $1 AND answer IS NULL", [caseId]))[0]!;
    expect(q.kind).toBe('versions');
    await fx.sendAs('question.answered', caseId, { questionId: q.id, taskId, answer: 'continue', answeredBy: 'operator-1' });
    await eventually(async () => (await task(taskId)).state === 'done', { timeoutMs: 20_000, what: 'done under the new prompt' });
    expect(await fx.rows('SELECT decision, decided_by FROM version_decisions WHERE task_id = $1', [taskId])).toEqual([{ decision: 'continue', decided_by: 'operator-1' }]);
    const kinds = (await fx.rows<{ kind: string }>('SELECT kind FROM ledger WHERE case_id = $1 ORDER BY seq', [caseId])).map((r) => r.kind);
    expect(kinds).toContain('versions_decided');
  });

  it('a hard cancel fences a parked task for good', async () => {
    const { caseId, taskId } = await fx.openCase('ticket', 'You answer a ticket that gets cancelled');
    await parkedOn(taskId, 'question');
    const before = await task(taskId);
    await fx.sendAs('task.cancel', caseId, { taskId, mode: 'hard', reason: 'customer withdrew', requestedBy: 'alice' });
    await eventually(async () => (await task(taskId)).state === 'cancelled', { what: 'cancelled' });
    expect((await task(taskId)).fence_epoch).toBe(before.fence_epoch + 1);
    // Answering now changes nothing: the task stays cancelled.
    await fx.sendAs('question.answered', caseId, { questionId: await questionOf(caseId), taskId, answer: 'x', answeredBy: 'alice' });
    await new Promise((r) => setTimeout(r, 500));
    expect((await task(taskId)).state).toBe('cancelled');
  });
});
