/**
 * `npm run bench:journal` — what one journal statement (`writeJournals`) costs the Postgres
 * server (not a test).
 *
 * A turn writes twice: C2 (the model's response completing its intent + a tool intent) and C3
 * (the tool's outcome + the state paper + checkpoint + the next model intent + a ledger record),
 * with the paper sizes of the turn benchmark's agents. This writes TURNS such turns for each of
 * TASKS claimed tasks, one statement at a time on one connection, BATCH task writes per
 * statement (a group commit of that size), and prints per batch size: server CPU per statement
 * and per task write (the backend's utime+stime from /proc, so the server must be local), wall
 * time per statement and its p50/p99. Each run is on a fresh database; batch sizes alternate
 * for ROUNDS rounds (this machine's speed drifts; compare within a round).
 *
 * Env: TASKS (1000), TURNS (3), BATCH (comma list, default "1,4"), ROUNDS (2), TEST_DATABASE_URL.
 */
import { newId } from '@everdict/contracts';
import { freshDatabase, processCpuMs } from '@everdict/testkit';
import { journalItem, newPaper } from '../src/journal.js';
import type { TurnWrite } from '../src/journal.js';
import type { LedgerHead } from '../src/ledgerHash.js';
import { migrate } from '../src/migrate.js';
import { createPgDb } from '../src/pg.js';
import { writeJournals } from '../src/sql/journal.js';
import type { JournalWriteItem, JournalWriteResult } from '../src/sql/journal.js';
import { Store } from '../src/store.js';
import { claimTask } from '../src/tasks.js';
import type { FenceToken } from '../src/unitOfWork.js';

const TASKS = Number(process.env.TASKS ?? 1000);
const TURNS = Number(process.env.TURNS ?? 3);
const BATCHES = (process.env.BATCH ?? '1,4').split(',').map(Number).filter((n) => n > 0);
const ROUNDS = Number(process.env.ROUNDS ?? 2);

interface Task {
  caseId: string;
  token: FenceToken;
  head: LedgerHead | null;
  modelCall: string;
  toolCall: string;
}

/** JSON-ish bytes of `n` bytes (compressible like a conversation, not like noise). */
function bytes(n: number): Buffer {
  let s = '{"messages":[';
  for (let i = 0; s.length < n; i++) s += `{"role":"user","content":"message ${i} ${newId()}"},`;
  return Buffer.from(s.slice(0, n));
}

const paper = (name: string, size: number) => newPaper({ kind: 'artefact', name: `${name}/${newId()}`, schemaId: 'everdict/bench.v1', bytes: bytes(size) });

function c2(t: Task, turn: number): TurnWrite {
  const response = paper('response', 260);
  const toolRequest = paper('tool', 38);
  t.toolCall = newId();
  return {
    papers: [response, toolRequest],
    completions: [{ id: t.modelCall, status: 'completed', responsePaperId: response.id, responseHash: response.contentHash, route: 'main', outcomeClass: null }],
    intents: [{ id: t.toolCall, turn, ordinal: 1, kind: 'read', toolName: 'read', requestPaperId: toolRequest.id, requestHash: toolRequest.contentHash, route: null, versions: { runtime: '1' } }],
    checkpoint: null,
    ledger: null,
  };
}

function c3(t: Task, turn: number): TurnWrite {
  const result = paper('result', 278);
  const state = paper('state', 2500);
  const next = paper('request', 5000);
  t.modelCall = newId();
  return {
    papers: [result, state, next],
    completions: [{ id: t.toolCall, status: 'completed', responsePaperId: result.id, responseHash: result.contentHash, route: null, outcomeClass: null }],
    intents: [{ id: t.modelCall, turn: turn + 1, ordinal: 0, kind: 'model', toolName: null, requestPaperId: next.id, requestHash: next.contentHash, route: 'main', versions: { runtime: '1' } }],
    checkpoint: { turn: turn + 1, statePaperId: state.id, stateHash: state.contentHash, contextHash: null, versions: { runtime: '1' } },
    ledger: { kind: 'turn.committed', body: { turn } },
  };
}

async function round(batch: number): Promise<Record<string, unknown>> {
  const info = await freshDatabase(`bench_journal_${batch}`);
  const db = createPgDb(info.url, { max: 1 });
  await migrate(db);
  const store = new Store(db);
  const tasks: Task[] = [];
  for (let i = 0; i < TASKS; i++) {
    const { caseId, taskId } = await store.unitOfWork(async (uow) => {
      const opened = await uow.openCase({ caseType: 'bench', originKey: `bench-${newId()}`, customer: 'bench' });
      return { caseId: opened.caseId, taskId: await uow.createTask({ caseId: opened.caseId, profile: 'agent' }) };
    });
    const claimed = await claimTask(store.db, taskId, 'bench', 600_000);
    if (!claimed.claimed) throw new Error(`claim failed: ${claimed.reason}`);
    tasks.push({ caseId, token: claimed.token, head: { seq: 0, hash: 'genesis' }, modelCall: newId(), toolCall: '' });
  }
  // Each task's first model intent, as the claim's first commit writes it.
  for (const t of tasks) {
    const request = paper('request', 5000);
    const w: TurnWrite = {
      papers: [request],
      completions: [],
      intents: [{ id: t.modelCall, turn: 0, ordinal: 0, kind: 'model', toolName: null, requestPaperId: request.id, requestHash: request.contentHash, route: 'main', versions: {} }],
      checkpoint: null,
      ledger: null,
    };
    await db.query(writeJournals([journalItem(t.token, t.caseId, w, null)]));
  }
  const { rows } = await db.query<{ pid: number }>({ text: 'SELECT pg_backend_pid() AS pid' });
  const pid = rows[0]!.pid;
  const cpuMs = () => processCpuMs(pid) ?? NaN;

  const lat: number[] = [];
  let writes = 0;
  const cpu0 = cpuMs();
  const t0 = performance.now();
  for (let turn = 0; turn < TURNS; turn++) {
    for (const step of [c2, c3]) {
      for (let i = 0; i < tasks.length; i += batch) {
        const group = tasks.slice(i, i + batch);
        const items: JournalWriteItem[] = group.map((t) => {
          const item = journalItem(t.token, t.caseId, step(t, turn), t.head);
          if (item.ledger) t.head = { seq: item.ledger.seq, hash: item.ledger.hash };
          return item;
        });
        const s = performance.now();
        const r = await db.query<JournalWriteResult>(writeJournals(items));
        lat.push(performance.now() - s);
        if (r.rows.some((x) => !x.applied)) throw new Error('a write was not applied');
        writes += items.length;
      }
    }
  }
  const wall = performance.now() - t0;
  const cpu = cpuMs() - cpu0;
  await db.close();
  await info.drop();
  lat.sort((a, b) => a - b);
  const at = (p: number) => +lat[Math.min(lat.length - 1, Math.floor(p * lat.length))]!.toFixed(3);
  return {
    batch,
    tasks: TASKS,
    statements: lat.length,
    server_cpu_ms_per_statement: +(cpu / lat.length).toFixed(3),
    server_cpu_ms_per_write: +(cpu / writes).toFixed(3),
    wall_ms_per_statement: +(wall / lat.length).toFixed(3),
    p50_ms: at(0.5),
    p99_ms: at(0.99),
  };
}

for (let r = 1; r <= ROUNDS; r++) {
  for (const batch of BATCHES) console.log(JSON.stringify({ round: r, ...(await round(batch)) }));
}
