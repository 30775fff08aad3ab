/**
 * Content-addressed history (issue 15 items 1 and 2) on real worker processes and Postgres:
 * - a 100-turn agent with distinct 2 KB tool results stores O(1) bytes per turn: the rows its
 *   turns 91–100 write are no bigger than 1.5 × those of turns 1–10 (each message's bytes are
 *   stored once, as a history block; the request and state papers are small manifests);
 * - a tool call's long text is stored ONCE (migration 0022): the model response, the call's
 *   request and result papers and the two conversation blocks that carry it all name the same
 *   span block, and each of them reassembles into the bytes its hash was recorded for;
 * - the request and state papers reassemble into the exact bytes their hashes were recorded for;
 * - a deleted or corrupted block (a conversation block or a span block) parks the next activation `restore_failed` (never a crash or a
 *   failure), and nothing is asked of the model;
 * - compaction triggers on the context's size against the route's window, keeping the pending
 *   work (§6 preservation check); a provider's context_too_long parks the task, never fails it.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contentHash } from '@everdict/store';
import { readinessBudgetMs } from '@everdict/testkit';
import { call, eventually, modelAsks, say, testConfig, turnsFixture, type ScriptStep, type TurnsFixture, type WorkerProc } from './helpers.js';

const QUESTION = { gap: 'g', checked: 'c', dependsOn: 'd', alternatives: ['x', 'y'], decisionNeeded: 'pick one' };
const TURNS = 100;
/** A distinct, incompressible 2 KB value (Postgres would compress a repeated one to nothing). */
const distinct2k = () => randomBytes(1536).toString('base64');

describe('content-addressed history', () => {
  let fx: TurnsFixture;
  let w: WorkerProc;
  let modelLog: string;
  const records = Array.from({ length: TURNS }, distinct2k);
  beforeAll(async () => {
    const config = testConfig({
      routes: { long: 'long.json', hold: 'hold.json', small: 'small.json', toolong: 'toolong.json' },
      profiles: {
        long: { version: '1', route: 'long', prompt: 'You read every record.', tools: ['echo'] },
        hold: { version: '1', route: 'hold', prompt: 'You read, then ask.', tools: ['echo'] },
        small: { version: '1', route: 'small', prompt: 'You read a lot on a small window.', tools: ['echo'] },
        toolong: { version: '1', route: 'toolong', prompt: 'Your context is too long.', tools: [] },
      },
      tools: { echo: { builtin: 'echo', description: 'Returns its arguments.' } },
      caseTypes: {
        long: { rootProfile: 'long', scope: { reads: 'all', writes: [], forbidden: [] } },
        hold: { rootProfile: 'hold', scope: { reads: 'all', writes: [], forbidden: [] } },
        small: { rootProfile: 'small', scope: { reads: 'all', writes: [], forbidden: [] }, budget: { maxTurns: 10 } },
        toolong: { rootProfile: 'toolong', scope: { reads: 'all', writes: [], forbidden: [] } },
      },
      runtime: { leaseTtlMs: 3000, sweepIntervalMs: 200, turnsPerActivation: 1000 },
    });
    // A window of 1 000 tokens (750 of them for the context) is outgrown after two 2 KB results.
    config.routes.small = { ...config.routes.small!, contextWindowTokens: 1000 };
    // The 100-turn agent's ~400 KB context fits its window: it is measured uncompacted.
    config.routes.long = { ...config.routes.long!, contextWindowTokens: 1_000_000 };
    fx = await turnsFixture('turns_history', config);
    fx.writeScript('long', [...records.map((record): ScriptStep => call(['echo', { record }])), say('read them all')]);
    fx.writeScript('hold', [call(['echo', { record: distinct2k() }]), call(['echo', { record: distinct2k() }]), call(['wait', { for: 'question', reason: 'need a decision', question: QUESTION }]), say('done')]);
    // Compacted after every turn or two; the scripted model still answers the next step (it
    // reads the step from the call ids the request shows), and the budget ends the run.
    fx.writeScript('small', Array.from({ length: 12 }, (_, i): ScriptStep => call(['todo', { items: [{ id: 'keep', text: 'still open', status: 'pending' }] }], ['echo', { page: i, record: distinct2k() }])));
    fx.writeScript('toolong', [{ error: { kind: 'context_too_long', status: 400 } }]);
    modelLog = join(fx.dir, 'model.log');
    w = await fx.worker('history', { EVERDICT_MODEL_LOG: modelLog });
  }, 30_000 + readinessBudgetMs());
  afterAll(async () => fx?.close());

  const task = async (id: string) =>
    (await fx.rows<{ state: string; park_reason: string | null; park_detail: Record<string, unknown> | null }>('SELECT state, park_reason, park_detail FROM tasks WHERE id = $1', [id]))[0]!;

  /**
   * Stored bytes (row data as Postgres stores it, indexes excluded) of what each turn wrote: the
   * rows created between the checkpoint before the turn and the one it committed (every row of
   * one commit carries the same transaction timestamp), and the turn's ledger record.
   */
  async function bytesPerTurn(caseId: string, taskId: string): Promise<number[]> {
    const rows = await fx.rows<{ turn: number; bytes: string }>(
      `WITH cp AS (SELECT turn, created_at, lag(created_at) OVER (ORDER BY turn) AS since FROM turn_checkpoints WHERE task_id = $2),
            w AS (SELECT turn - 1 AS turn, COALESCE(since, '-infinity') AS since, created_at AS upto FROM cp),
            sized AS (
              SELECT p.created_at AS at, pg_column_size(p.*) AS n FROM papers p WHERE p.case_id = $1
              UNION ALL SELECT r.created_at, pg_column_size(r.*) FROM paper_revisions r JOIN papers p ON p.id = r.paper_id WHERE p.case_id = $1
              UNION ALL SELECT b.created_at, pg_column_size(b.*) FROM history_blocks b WHERE b.case_id = $1
              UNION ALL SELECT c.created_at, pg_column_size(c.*) FROM runtime_calls c WHERE c.task_id = $2
              UNION ALL SELECT k.created_at, pg_column_size(k.*) FROM turn_checkpoints k WHERE k.task_id = $2
              UNION ALL SELECT x.recorded_at, pg_column_size(x.*) FROM cost_ledger x WHERE x.task_id = $2
            )
       SELECT w.turn,
              (COALESCE((SELECT sum(n) FROM sized WHERE at > w.since AND at <= w.upto), 0)
               + COALESCE((SELECT sum(pg_column_size(l.*)) FROM ledger l WHERE l.case_id = $1 AND l.kind = 'turn' AND (l.body->>'turn')::int = w.turn), 0))::text AS bytes
         FROM w ORDER BY w.turn`,
      [caseId, taskId],
    );
    return rows.map((r) => Number(r.bytes));
  }

  it('a 100-turn agent with distinct 2 KB results stores O(1) bytes per turn, and every paper reassembles into its recorded bytes', async () => {
    const { caseId, taskId } = await fx.openCase('long', 'read every record');
    await eventually(async () => (await task(taskId)).state === 'done', { timeoutMs: 60_000, what: 'the 100-turn agent done' });
    const perTurn = await bytesPerTurn(caseId, taskId);
    expect(perTurn.length).toBeGreaterThanOrEqual(TURNS);
    const avg = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const first10 = avg(perTurn.slice(0, 10));
    const last10 = avg(perTurn.slice(TURNS - 10, TURNS));
    const total = perTurn.reduce((a, b) => a + b, 0);
    console.log(JSON.stringify({ phase: 'history-test', turns: TURNS, tool_result_bytes: 2048, bytes_per_turn_first10: Math.round(first10), bytes_per_turn_last10: Math.round(last10), bytes_per_agent: total }));
    expect(last10, `bytes per turn, turns 91–100 vs 1–10 (${Math.round(last10)} vs ${Math.round(first10)})`).toBeLessThanOrEqual(1.5 * first10);

    // The exact bytes: each model request and each state paper reassembles into bytes whose
    // sha256 is the hash the journal row and the checkpoint recorded.
    const requests = await fx.rows<{ request_hash: string; doc: Buffer | null; layout: string | null; size: number }>(
      `SELECT c.request_hash, paper_document(r.paper_id, r.revision) AS doc, r.layout, r.size_bytes AS size
         FROM runtime_calls c JOIN papers p ON p.id = c.request_paper_id JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
        WHERE c.task_id = $1 AND c.ordinal = 0 ORDER BY c.turn`,
      [taskId],
    );
    expect(requests.length).toBe(TURNS + 1);
    for (const r of requests) {
      expect(r.layout).toBe('history-manifest.v1');
      expect(contentHash(r.doc!)).toBe(r.request_hash);
    }
    const last = requests[requests.length - 1]!;
    const doc = JSON.parse(last.doc!.toString('utf8')) as { request: { messages: unknown[] } };
    expect(doc.request.messages.length).toBe(1 + 2 * TURNS);
    // The manifest of the last, ~400 KB request is a few KB (the tool schemas, not the messages).
    expect(last.size).toBeLessThan(16_000);
    expect(last.doc!.length).toBeGreaterThan(TURNS * 4096);
    const states = await fx.rows<{ state_hash: string; doc: Buffer | null }>(
      `SELECT k.state_hash, paper_document(r.paper_id, r.revision) AS doc FROM turn_checkpoints k JOIN papers p ON p.id = k.state_paper_id
         JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE k.task_id = $1`,
      [taskId],
    );
    for (const s of states) expect(contentHash(s.doc!)).toBe(s.state_hash);
    // Each message is one block: the objective, then an assistant message and a tool result a
    // turn, and the final answer; plus ONE tail block, the request suffix (prompt, tool schemas,
    // route) every request of the agent shares; plus one span block a turn, its 2 KB record,
    // which the turn's assistant message and tool result (stored as spans manifests) name.
    const [blocks] = await fx.rows<{ n: number; unchained: number; spanned: number }>(
      `SELECT count(*)::int AS n, (count(*) FILTER (WHERE prev IS NULL))::int AS unchained, (count(*) FILTER (WHERE layout = 'spans.v1'))::int AS spanned
         FROM history_blocks WHERE case_id = $1`,
      [caseId],
    );
    expect(blocks).toEqual({ n: 1 + 2 * TURNS + 1 + 1 + TURNS, unchained: 2 + TURNS, spanned: 2 * TURNS }); // the objective's block has no prev either
    // Every tool call's request and result paper, and every model response, reassembles into
    // the bytes its recorded hash names.
    const calls = await fx.rows<{ ordinal: number; request_hash: string; response_hash: string; rq: Buffer | null; rs: Buffer | null; rq_layout: string | null; rs_layout: string | null }>(
      `SELECT c.ordinal, c.request_hash, c.response_hash, paper_document(rq.paper_id, rq.revision) AS rq, paper_document(rs.paper_id, rs.revision) AS rs, rq.layout AS rq_layout, rs.layout AS rs_layout
         FROM runtime_calls c
         JOIN papers pq ON pq.id = c.request_paper_id JOIN paper_revisions rq ON rq.paper_id = pq.id AND rq.revision = pq.head_revision
         JOIN papers ps ON ps.id = c.response_paper_id JOIN paper_revisions rs ON rs.paper_id = ps.id AND rs.revision = ps.head_revision
        WHERE c.task_id = $1 ORDER BY c.turn, c.ordinal`,
      [taskId],
    );
    expect(calls.length).toBe(2 * TURNS + 1);
    for (const c of calls) {
      expect(contentHash(c.rq!)).toBe(c.request_hash);
      expect(contentHash(c.rs!)).toBe(c.response_hash);
    }
    expect(calls.filter((c) => c.ordinal > 0).every((c) => c.rq_layout === 'spans.v1' && c.rs_layout === 'spans.v1')).toBe(true);
    // Each record's bytes are stored once: in its span block, in no paper and no other block.
    const [stored] = await fx.rows<{ in_blocks: number; in_papers: number }>(
      `SELECT (SELECT count(*) FROM history_blocks b, unnest($2::text[]) AS t(x) WHERE b.case_id = $1 AND position(convert_to(t.x, 'UTF8') IN b.bytes) > 0)::int AS in_blocks,
              (SELECT count(*) FROM paper_revisions r JOIN papers p ON p.id = r.paper_id, unnest($2::text[]) AS t(x) WHERE p.case_id = $1 AND position(convert_to(t.x, 'UTF8') IN r.bytes) > 0)::int AS in_papers`,
      [caseId, records],
    );
    expect(stored).toEqual({ in_blocks: TURNS, in_papers: 0 });
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  }, 180_000);

  /** Runs a case to its question, applies `damage` to one of its history blocks, answers it. */
  async function damagedRestore(damage: string, reason: string) {
    const { caseId, taskId } = await fx.openCase('hold', 'read, then ask');
    await eventually(async () => (await task(taskId)).park_reason === 'question', { timeoutMs: 20_000, what: 'task parked on its question' });
    const changed = await fx.db.query({
      text: damage,
      values: [caseId],
    });
    expect(changed.rowCount, 'the damage statement changed a block').toBe(1);
    const asked = modelAsks(modelLog).filter((a) => a.taskId === taskId).length;
    const [q] = await fx.rows<{ id: string }>('SELECT id FROM questions WHERE case_id = $1 AND answer IS NULL', [caseId]);
    await fx.sendAs('question.answered', caseId, { questionId: q!.id, taskId, answer: 'x', answeredBy: 'alice' });
    await eventually(async () => (await task(taskId)).park_reason === 'capability_gap', { timeoutMs: 20_000, what: 'task parked on the restore failure' });
    expect(await task(taskId)).toMatchObject({ state: 'parked', park_detail: { kind: 'restore_failed', reason } });
    expect(modelAsks(modelLog).filter((a) => a.taskId === taskId).length).toBe(asked);
    expect(w.proc.exitCode).toBeNull(); // the worker did not crash
    expect(await fx.store.verifyLedger(caseId)).toMatchObject({ ok: true });
  }

  // The block of the first tool result: a middle link of the chain every later paper names.
  const FIRST_RESULT = `(SELECT hash FROM history_blocks WHERE case_id = $1 AND convert_from(spans_document(case_id, bytes), 'UTF8') LIKE '{"callId":%' ORDER BY created_at, hash LIMIT 1)`;
  // The span block of the first record (2 048 base64 characters), which that tool result names.
  const FIRST_SPAN = `(SELECT hash FROM history_blocks WHERE case_id = $1 AND prev IS NULL AND layout IS NULL AND octet_length(bytes) = 2048 ORDER BY created_at, hash LIMIT 1)`;
  it('a deleted history block parks the next activation restore_failed (paper_missing)', async () => {
    await damagedRestore(`DELETE FROM history_blocks WHERE case_id = $1 AND hash = ${FIRST_RESULT}`, 'paper_missing');
  }, 60_000);

  it('a corrupted history block parks the next activation restore_failed (paper_corrupt)', async () => {
    await damagedRestore(`UPDATE history_blocks SET bytes = convert_to(replace(convert_from(bytes, 'UTF8'), '"record', '"forged'), 'UTF8') WHERE case_id = $1 AND hash = ${FIRST_RESULT}`, 'paper_corrupt');
  }, 60_000);

  it('a deleted span block parks the next activation restore_failed (paper_missing)', async () => {
    await damagedRestore(`DELETE FROM history_blocks WHERE case_id = $1 AND hash = ${FIRST_SPAN}`, 'paper_missing');
  }, 60_000);

  it('a corrupted span block parks the next activation restore_failed (paper_corrupt)', async () => {
    await damagedRestore(`UPDATE history_blocks SET bytes = set_byte(bytes, 0, CASE get_byte(bytes, 0) WHEN 65 THEN 66 ELSE 65 END) WHERE case_id = $1 AND hash = ${FIRST_SPAN}`, 'paper_corrupt');
  }, 60_000);

  it('the context is compacted by its size against the route window, keeping the pending work', async () => {
    const { caseId, taskId } = await fx.openCase('small', 'read a lot');
    await eventually(async () => (await task(taskId)).state === 'parked', { timeoutMs: 30_000, what: 'the small-window task parked' });
    expect(await task(taskId)).toMatchObject({ park_reason: 'budget' });
    const [summary] = await fx.rows<{ bytes: Buffer }>(
      `SELECT r.bytes FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE p.case_id = $1 AND p.name = $2`,
      [caseId, `tasks/${taskId}/summary`],
    );
    expect(summary, 'a summary paper was written').toBeDefined();
    const doc = JSON.parse(summary!.bytes.toString('utf8')) as { pending: { todos: { id: string }[] } };
    expect(doc.pending.todos.map((t) => t.id)).toContain('keep');
    // Ten turns of two messages each, but no request carried the whole history: the context
    // was cut each time it outgrew 750 tokens (≈ 3 000 bytes, one and a half 2 KB results).
    const sizes = await fx.rows<{ turn: number; n: number }>(
      `SELECT c.turn, jsonb_array_length(convert_from(paper_document(r.paper_id, r.revision), 'UTF8')::jsonb->'request'->'messages') AS n
         FROM runtime_calls c JOIN papers p ON p.id = c.request_paper_id JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
        WHERE c.task_id = $1 AND c.ordinal = 0 ORDER BY c.turn`,
      [taskId],
    );
    expect(sizes.length).toBe(10);
    expect(Math.max(...sizes.map((s) => s.n))).toBeLessThanOrEqual(6);
    // Each turn ran the script's next step: no step came back after a compaction dropped it.
    const pages = await fx.rows<{ doc: string }>(
      `SELECT convert_from(paper_document(r.paper_id, r.revision), 'UTF8') AS doc
         FROM runtime_calls c JOIN papers p ON p.id = c.request_paper_id JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
        WHERE c.task_id = $1 AND c.tool_name = 'echo' ORDER BY c.turn`,
      [taskId],
    );
    const read = pages.map((r) => Number(/"page":(\d+)/.exec(r.doc)?.[1]));
    expect(read.length).toBeGreaterThanOrEqual(9);
    expect(read).toEqual(read.map((_, i) => i));
  }, 60_000);

  it('a context_too_long provider error parks the task (never fails it) with its state published', async () => {
    const { taskId } = await fx.openCase('toolong', 'a long story');
    await eventually(async () => (await task(taskId)).state === 'parked', { timeoutMs: 20_000, what: 'task parked' });
    expect(await task(taskId)).toMatchObject({ state: 'parked', park_reason: 'capability_gap', park_detail: { cause: 'context_too_long', handoff: 'published' } });
  }, 30_000);
});
