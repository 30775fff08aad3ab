/**
 * The one-task journal statement (`writeJournal`, what a group commit of one sends) against the
 * batch statement (`writeJournals`) on real Postgres and on PGlite: for every shape a turn
 * writes, and for every refusal — stale fence, moved ledger head, a call already settled, an
 * intent already there — both return the same result row and leave the same rows behind.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import type { Db } from '../src/db.js';
import { chainAfter, journalItem, newPaper } from '../src/journal.js';
import type { LedgerHead, TurnWrite } from '../src/journal.js';
import { migrate } from '../src/migrate.js';
import { createPgliteDb } from '../src/pglite.js';
import { writeJournals } from '../src/sql/journal.js';
import type { JournalWriteResult } from '../src/sql/journal.js';
import { journalStatement, writeJournal } from '../src/sql/journalOne.js';
import { Store } from '../src/store.js';
import type { FenceToken } from '../src/unitOfWork.js';
import { seedCase, testStore } from './helpers.js';

interface Task {
  caseId: string;
  taskId: string;
  token: FenceToken;
  head: LedgerHead | null;
}

const paper = (name: string, text: string) => newPaper({ kind: 'artefact', name: `${name}/${newId()}`, schemaId: 'test', bytes: Buffer.from(text) });

/** A model intent of `turn` (ordinal 0), as the previous turn's commit writes it. */
function intentWrite(turn: number): { w: TurnWrite; callId: string } {
  const req = paper('request', `{"turn":${turn},"say":"é ✓"}`);
  const callId = newId();
  return {
    callId,
    w: {
      papers: [req],
      completions: [],
      intents: [{ id: callId, turn, ordinal: 0, kind: 'model', toolName: null, requestPaperId: req.id, requestHash: req.contentHash, route: 'main', versions: { runtime: 'r1' } }],
      checkpoint: null,
      ledger: null,
    },
  };
}

/** C2: the model's response completes its intent, with the intents of two tool calls. */
function responseWrite(turn: number, modelCallId: string): TurnWrite {
  const resp = paper('response', '{"text":null,"toolCalls":2}');
  const t1 = paper('tool', '{"page":1}');
  const t2 = paper('tool', '{"page":2}');
  return {
    papers: [resp, t1, t2],
    completions: [{ id: modelCallId, status: 'completed', responsePaperId: resp.id, responseHash: resp.contentHash, route: 'swapped', outcomeClass: null }],
    intents: [t1, t2].map((p, i) => ({ id: newId(), turn, ordinal: i + 1, kind: 'read' as const, toolName: 'read', requestPaperId: p.id, requestHash: p.contentHash, route: null, versions: {} })),
    checkpoint: null,
    ledger: null,
  };
}

/** C3 of a last turn: a tool outcome, the checkpoint, the ledger record, the release and its message. */
function finalWrite(turn: number, toolCallId: string | null, transition: TurnWrite['transition']): TurnWrite {
  const result = paper('result', '{"rows":[1,2,3]}');
  const state = paper('state', `{"turn":${turn + 1}}`);
  return {
    papers: [result, state],
    completions: toolCallId ? [{ id: toolCallId, status: 'failed', responsePaperId: result.id, responseHash: result.contentHash, route: null, outcomeClass: 'tool_error' }] : [],
    intents: [],
    checkpoint: { turn: turn + 1, statePaperId: state.id, stateHash: state.contentHash, contextHash: 'ctx', versions: { profile: 'p1' } },
    ledger: { kind: 'turn.committed', body: { turn, note: 'ñ' } },
    transition,
    outbox: [{ messageId: newId(), type: 'task.finished', routingKey: 'task.finished', body: Buffer.from('{"outcome":"done"}') }],
  };
}

type Form = 'one' | 'batch';

async function write(db: Db, form: Form, t: Task, w: TurnWrite): Promise<Omit<JournalWriteResult, 'idx'>> {
  const chained = w.ledger === null ? null : chainAfter(t.caseId, t.head, w.ledger);
  const item = journalItem(t.token, t.caseId, w, chained);
  const sql = form === 'one' ? writeJournal(item) : writeJournals([item]);
  if (sql === null) throw new Error('no one-task statement for this write');
  const { rows } = await db.query<JournalWriteResult & { notified?: unknown }>(sql);
  expect(rows).toHaveLength(1);
  const { idx, notified: _notified, ...rest } = rows[0]!;
  expect(idx).toBe(0);
  if (rest.applied && chained) t.head = { seq: chained.seq, hash: chained.hash };
  return rest;
}

/** What a task's writes left behind, without the ids that differ between the two tasks. */
async function footprint(db: Db, t: Task): Promise<unknown> {
  const q = async (text: string) => (await db.query({ text, values: [t.taskId, t.caseId] })).rows;
  return {
    calls: await q(`SELECT c.turn, c.ordinal, c.kind, c.tool_name, c.status, c.fence_epoch, c.route, c.outcome_class, c.versions,
                           c.completed_at IS NOT NULL AS completed, rq.bytes AS request, rs.bytes AS response
                      FROM runtime_calls c
                      LEFT JOIN paper_revisions rq ON rq.paper_id = c.request_paper_id
                      LEFT JOIN paper_revisions rs ON rs.paper_id = c.response_paper_id
                     WHERE c.task_id = $1 AND $2::uuid IS NOT NULL ORDER BY c.turn, c.ordinal`),
    papers: await q(`SELECT p.kind, split_part(p.name, '/', 1) AS name, r.revision, r.schema_id, r.content_hash, r.size_bytes, r.bytes
                       FROM papers p JOIN paper_revisions r ON r.paper_id = p.id
                      WHERE p.case_id = $2 AND $1::uuid IS NOT NULL ORDER BY r.content_hash, split_part(p.name, '/', 1)`),
    checkpoints: await q(`SELECT turn, state_hash, context_hash, fence_epoch, versions FROM turn_checkpoints WHERE task_id = $1 AND $2::uuid IS NOT NULL ORDER BY turn`),
    ledger: await q(`SELECT seq, kind, body FROM ledger WHERE case_id = $2 AND $1::uuid IS NOT NULL ORDER BY seq`),
    task: await q(`SELECT state, park_reason, park_detail, parked_at IS NOT NULL AS parked, wake_at IS NOT NULL AS wakes, lease_owner, row_version
                     FROM tasks WHERE id = $1 AND $2::uuid IS NOT NULL`),
    outbox: await q(`SELECT type, routing_key, body FROM outbox_messages WHERE case_id = $2 AND $1::uuid IS NOT NULL ORDER BY seq`),
  };
}

function suite(label: string, open: () => Promise<{ store: Store; close(): Promise<void> }>): void {
  describe(`one-task journal statement = batch statement of one (${label})`, () => {
    let store: Store;
    let close: () => Promise<void>;
    beforeAll(async () => {
      ({ store, close } = await open());
    });
    afterAll(async () => close?.());

    const twins = async (): Promise<Record<Form, Task>> => {
      const make = async (): Promise<Task> => {
        const { caseId, taskId } = await seedCase(store);
        const c = await store.claimTask(taskId, 'w1', { ttlMs: 30_000 });
        if (!c.claimed) throw new Error('claim failed');
        return { caseId, taskId, token: c.token, head: { seq: 0, hash: 'genesis' } };
      };
      return { one: await make(), batch: await make() };
    };

    it('writes every turn shape the same way: intents, a response with tool intents, outcomes, checkpoint, ledger, release, outbox', async () => {
      const tasks = await twins();
      for (const form of ['one', 'batch'] as const) {
        const t = tasks[form];
        const first = intentWrite(0);
        expect(await write(store.db, form, t, first.w)).toMatchObject({ fenced: true, applied: true, completed: 0, inserted: 1, cancel_requested: null });
        const c2 = responseWrite(0, first.callId);
        expect(await write(store.db, form, t, c2)).toMatchObject({ fenced: true, applied: true, completed: 1, inserted: 2 });
        const parked = finalWrite(0, c2.intents[0]!.id, { state: 'parked', parkReason: 'provider_down', parkDetail: { route: 'main' }, wakeAfterMs: 1500 });
        expect(await write(store.db, form, t, { ...parked, outbox: [] })).toMatchObject({ fenced: true, applied: true, completed: 1, inserted: 0 });
      }
      expect(await footprint(store.db, tasks.one)).toEqual(await footprint(store.db, tasks.batch));

      const again = await twins();
      for (const form of ['one', 'batch'] as const) {
        const t = again[form];
        const done = finalWrite(3, null, { state: 'done', parkReason: null, parkDetail: null, wakeAfterMs: null });
        expect(await write(store.db, form, t, done)).toMatchObject({ fenced: true, applied: true, completed: 0, inserted: 0 });
      }
      const one = (await footprint(store.db, again.one)) as { task: { state: string; lease_owner: string | null }[]; outbox: unknown[] };
      expect(one.task[0]).toMatchObject({ state: 'done', lease_owner: null });
      expect(one.outbox).toHaveLength(1);
      expect(one).toEqual(await footprint(store.db, again.batch));
    });

    it('refuses the same way: a stale fence, a moved ledger head, a settled call, an existing intent', async () => {
      const tasks = await twins();
      const results: Record<Form, unknown[]> = { one: [], batch: [] };
      for (const form of ['one', 'batch'] as const) {
        const t = tasks[form];
        const first = intentWrite(0);
        await write(store.db, form, t, first.w);
        const c2 = responseWrite(0, first.callId);
        await write(store.db, form, t, c2);
        // The same outcome again: the call is settled, nothing is overwritten; the same intent keys: none replaced.
        results[form].push(await write(store.db, form, t, { ...responseWrite(0, first.callId), intents: c2.intents.map((i) => ({ ...i, id: newId() })) }));
        // Someone else appended to the case: the compare-and-set misses and nothing of the write lands.
        await store.unitOfWork((uow) => uow.appendLedger(t.caseId, { kind: 'other', body: {} }));
        results[form].push(await write(store.db, form, t, finalWrite(0, c2.intents[0]!.id, null)));
        // A stale epoch: nothing lands, the fence says so.
        const stale = { ...t, token: { ...t.token, epoch: t.token.epoch - 1 } };
        results[form].push(await write(store.db, form, stale, finalWrite(0, c2.intents[1]!.id, null)));
      }
      expect(results.one).toEqual([
        { fenced: true, applied: true, completed: 0, inserted: 0, cancel_requested: null, row_version: expect.any(Number) },
        { fenced: true, applied: false, completed: 0, inserted: 0, cancel_requested: null, row_version: expect.any(Number) },
        { fenced: false, applied: false, completed: 0, inserted: 0, cancel_requested: null, row_version: null },
      ]);
      expect(results.one).toEqual(results.batch);
      expect(await footprint(store.db, tasks.one)).toEqual(await footprint(store.db, tasks.batch));
    });

    it('leaves a write with several call outcomes to the batch statement', () => {
      const t: Task = { caseId: newId(), taskId: newId(), token: { taskId: newId(), owner: 'w1', epoch: 1 }, head: null };
      const w = finalWrite(0, newId(), null);
      const two = { ...w, completions: [w.completions[0]!, { ...w.completions[0]!, id: newId() }] };
      const item = journalItem(t.token, t.caseId, two, chainAfter(t.caseId, null, w.ledger!));
      expect(writeJournal(item)).toBeNull();
      expect(journalStatement([item]).name).toMatch(/^ev_write_journals_/);
      expect(journalStatement([journalItem(t.token, t.caseId, w, null)]).name).toMatch(/^ev_write_journal_one_/);
    });
  });
}

suite('Postgres', async () => {
  const pg = await testStore('journal_one');
  return { store: pg.store, close: pg.close };
});

suite('PGlite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'everdict-journal-one-'));
  const db = await createPgliteDb(dir);
  await migrate(db);
  return {
    store: new Store(db),
    close: async () => {
      await db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
