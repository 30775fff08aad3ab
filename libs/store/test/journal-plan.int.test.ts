/**
 * The journal statement's plan on real Postgres: every row it reads in a big table is found by
 * an index probe — the fenced tasks, the settled calls, the released tasks — in the GENERIC plan
 * a prepared statement keeps for the life of its connection, built here while the tables are
 * nearly empty (when a scan looks cheapest to the planner, and when a long-lived worker's
 * connections build it). A scan there would make every turn's write cost grow with the table.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { journalItem, newPaper } from '../src/journal.js';
import type { TurnWrite } from '../src/journal.js';
import { writeJournals } from '../src/sql/journal.js';
import { claimTask } from '../src/tasks.js';
import type { JournalWriteItem } from '../src/sql/journal.js';
import type { FenceToken } from '../src/unitOfWork.js';
import { genericPlan, seedCase, testStore } from './helpers.js';
import type { TestStore } from './helpers.js';

const BIG = ['tasks', 'runtime_calls', 'papers', 'paper_revisions', 'turn_checkpoints', 'ledger', 'ledger_heads', 'outbox_messages', 'cases'];

const paper = (name: string) => newPaper({ kind: 'artefact', name: `${name}/${newId()}`, schemaId: 'test', bytes: Buffer.from(`{"${name}":1}`) });

/**
 * Every shape a turn writes: C2, C3, a last C3 that releases the task with a message, and a park
 * alone (a transition and its ledger record, nothing of a turn).
 */
function shapes(): TurnWrite[] {
  const response = paper('response');
  const tool = paper('tool');
  const result = paper('result');
  const state = paper('state');
  const next = paper('request');
  const c2: TurnWrite = {
    papers: [response, tool],
    completions: [{ id: newId(), status: 'completed', responsePaperId: response.id, responseHash: response.contentHash, route: 'main', outcomeClass: null }],
    intents: [{ id: newId(), turn: 1, ordinal: 1, kind: 'read', toolName: 'read', requestPaperId: tool.id, requestHash: tool.contentHash, route: null, versions: {} }],
    checkpoint: null,
    ledger: null,
  };
  const c3: TurnWrite = {
    papers: [result, state, next],
    completions: [{ id: newId(), status: 'completed', responsePaperId: result.id, responseHash: result.contentHash, route: null, outcomeClass: null }],
    intents: [{ id: newId(), turn: 2, ordinal: 0, kind: 'model', toolName: null, requestPaperId: next.id, requestHash: next.contentHash, route: 'main', versions: {} }],
    checkpoint: { turn: 2, statePaperId: state.id, stateHash: state.contentHash, contextHash: null, versions: {} },
    ledger: { kind: 'turn.committed', body: { turn: 1 } },
  };
  const last: TurnWrite = {
    ...c3,
    intents: [],
    transition: { state: 'done', parkReason: null, parkDetail: null, wakeAfterMs: null },
    outbox: [{ messageId: newId(), type: 'task.finished', routingKey: 'task.finished', body: Buffer.from('{}') }],
  };
  const parked: TurnWrite = {
    papers: [],
    completions: [],
    intents: [],
    checkpoint: null,
    ledger: { kind: 'task_parked', body: { reason: 'gate' } },
    transition: { state: 'parked', parkReason: 'gate', parkDetail: { kind: 'soft_cancel' }, wakeAfterMs: null },
  };
  return [c2, c3, last, parked];
}

describe('the journal statement reads big tables by index probe only', () => {
  let fx: TestStore;
  let items: (w: TurnWrite) => JournalWriteItem[];
  beforeAll(async () => {
    fx = await testStore('journal_plan');
    const tasks = await Promise.all([seedCase(fx.store), seedCase(fx.store), seedCase(fx.store)]);
    const tokens: FenceToken[] = [];
    for (const t of tasks) {
      const c = await claimTask(fx.store.db, t.taskId, 'w1', 30_000);
      if (!c.claimed) throw new Error('claim failed');
      tokens.push(c.token);
    }
    items = (w) => tasks.map((t, i) => journalItem(tokens[i]!, t.caseId, w, null));
  });
  afterAll(async () => fx?.close());

  it('in the generic plan of every shape, for one task and for a batch', async () => {
    const [, , last] = shapes();
    // Every shape, and a finish that also locks its case row (the group commit's finishes).
    const variants = [...shapes().map((w) => ({ w, lockCases: false })), { w: last!, lockCases: true }];
    for (const { w, lockCases } of variants) {
      for (const batch of [items(w).slice(0, 1), items(w)]) {
        const sql = writeJournals(batch, { lockCases });
        const plan = await genericPlan(fx.store.db, sql, sql.values!.map((v) => (Buffer.isBuffer(v) ? 'bytea' : 'jsonb')));
        const scans = BIG.filter((table) => new RegExp(`Seq Scan on ${table}\\b`).test(plan));
        expect(scans, `${sql.name} × ${batch.length}:\n${plan}`).toEqual([]);
        expect(plan, sql.name).toMatch(/Index Scan using tasks_pkey on tasks/);
        if (w.completions.length > 0) expect(plan, sql.name).toMatch(/Index Scan using runtime_calls_pkey on runtime_calls/);
        if (lockCases) expect(plan, sql.name).toMatch(/Index Scan using cases_pkey on cases/);
      }
    }
  });
});
