/**
 * RUNTIME_CALLS statements for the durable turn (seed 004 §2.1). One row per model or tool call,
 * unique per task + turn + ordinal (ordinal 0 is the model call), its id allocated before
 * dispatch. Request and response bytes live in papers (content-addressed, immutable revisions);
 * the row keeps their ids and hashes.
 *
 * Hot-path statements write a batch of papers and the call rows that reference them in ONE
 * statement (data-modifying CTEs), so a turn's commits stay a handful of round trips. Foreign
 * keys are checked at the end of the statement, when the papers of the same statement exist.
 */
import type { Sql } from '../db.js';
import type { ModelCallCost } from '../costs.js';
import type { ChainedRecord } from '../ledgerHash.js';
import type { HistoryBlock } from '../history.js';

/** One paper written as its first (and only) revision. Names are unique per case. */
export interface NewPaper {
  readonly id: string;
  readonly kind: string;
  readonly name: string;
  readonly schemaId: string;
  readonly contentHash: string;
  readonly bytes: Buffer;
  /**
   * 'history-manifest.v1' / 'spans.v1': `bytes` is a manifest and `contentHash` the hash of the
   * document it reassembles into (history.ts, migrations 0018 and 0022). Absent: `bytes` is the document.
   */
  readonly layout?: 'history-manifest.v1' | 'spans.v1';
  /** History blocks the manifest names that are not stored yet: written by the same statement. */
  readonly blocks?: readonly HistoryBlock[];
}

export interface NewCallIntent {
  readonly id: string;
  readonly turn: number;
  readonly ordinal: number;
  readonly kind: 'model' | 'read' | 'control' | 'effect';
  readonly toolName: string | null;
  readonly requestPaperId: string;
  readonly requestHash: string;
  readonly route: string | null;
  readonly versions: unknown;
  /**
   * The outcome of a call the kernel withheld on its own decision: the row is inserted already
   * settled (its response paper among the write's papers). Nothing ran, so no open intent had to
   * be durable before it. Absent: the row is an open intent.
   */
  readonly settled?: Omit<CallCompletion, 'id' | 'route'>;
}

export interface CallCompletion {
  readonly id: string;
  readonly status: 'completed' | 'failed' | 'unknown' | 'refused' | 'shadowed';
  readonly responsePaperId: string;
  readonly responseHash: string;
  /** The route that served a model call (a swapped route is visible per call); null for tools. */
  readonly route: string | null;
  readonly outcomeClass: string | null;
  /** An answered model call's measured usage: its `cost_ledger` row, written only if this completion applies. */
  readonly usage?: ModelCallCost;
}

/** CTE fragments inserting `papers` as first revisions; parameters $1..$6 are the paper columns. */
function paperCtes(caseParam: string): string {
  return `p_ins AS (
              INSERT INTO papers (id, case_id, kind, name, head_revision)
              SELECT x.id, ${caseParam}, x.kind, x.name, 1
                FROM unnest($1::uuid[], $2::text[], $3::text[]) AS x(id, kind, name)
              RETURNING id
            ),
            r_ins AS (
              INSERT INTO paper_revisions (paper_id, revision, schema_id, content_hash, size_bytes, bytes, layout)
              SELECT x.id, 1, x.schema_id, x.hash, octet_length(x.bytes), x.bytes, x.layout
                FROM unnest($1::uuid[], $4::text[], $5::text[], $6::bytea[], $8::text[]) AS x(id, schema_id, hash, bytes, layout)
              RETURNING paper_id
            ),
            hb_ins AS (
              INSERT INTO history_blocks (case_id, hash, prev, size_bytes, bytes, layout)
              SELECT ${caseParam}, x.hash, x.prev, octet_length(x.bytes), x.bytes, x.layout
                FROM unnest($9::text[], $10::text[], $11::bytea[], $12::text[]) AS x(hash, prev, bytes, layout)
              ON CONFLICT (case_id, hash) DO NOTHING
              RETURNING hash
            )`;
}

/** The blocks a batch of papers carries, each once (two manifests of one write share blocks). */
function blocksOf(papers: readonly NewPaper[]): HistoryBlock[] {
  const seen = new Set<string>();
  const out: HistoryBlock[] = [];
  for (const p of papers) {
    for (const b of p.blocks ?? []) {
      if (seen.has(b.hash)) continue;
      seen.add(b.hash);
      out.push(b);
    }
  }
  return out;
}

function blockValues(blocks: readonly HistoryBlock[]): unknown[] {
  return [blocks.map((b) => b.hash), blocks.map((b) => b.prev), blocks.map((b) => b.bytes), blocks.map((b) => b.layout ?? null)];
}

function paperValues(papers: readonly NewPaper[]): unknown[] {
  return [papers.map((p) => p.id), papers.map((p) => p.kind), papers.map((p) => p.name), papers.map((p) => p.schemaId), papers.map((p) => p.contentHash), papers.map((p) => p.bytes)];
}

/** Papers only (result offloads, derived documents), in one statement. */
export function insertPapers(caseId: string, papers: readonly NewPaper[]): Sql {
  return {
    name: 'ev_insert_papers_v2',
    text: `WITH ${paperCtes('$7::uuid')} SELECT count(*)::int AS n FROM r_ins`,
    values: [...paperValues(papers), caseId, papers.map((p) => p.layout ?? null), ...blockValues(blocksOf(papers))],
  };
}

export interface CheckpointWrite {
  readonly turn: number;
  readonly statePaperId: string;
  readonly stateHash: string;
  readonly contextHash: string | null;
  readonly versions: unknown;
}

/** A transition out of the lease, written with the turn (done, failed, cancelled, parked, open). */
export interface TransitionWrite {
  readonly state: 'done' | 'failed' | 'cancelled' | 'parked' | 'open';
  readonly parkReason: string | null;
  readonly parkDetail: unknown;
  /** Backoff timer of a provider/connector park, in ms (null: none). */
  readonly wakeAfterMs: number | null;
}

/** An outbox row written with the turn (the envelope's exact bytes, UTF-8 JSON). */
export interface OutboxWrite {
  readonly messageId: string;
  readonly type: string;
  readonly routingKey: string;
  readonly body: Buffer;
  /** The envelope's traceparent, stored in the row's own column for the relay. */
  readonly traceparent?: string | undefined;
}

interface JournalWrite {
  readonly papers: readonly NewPaper[];
  /** Outcomes of open calls (response papers among `papers`). */
  readonly completions: readonly CallCompletion[];
  /** New intents (request papers among `papers`); an existing journal key keeps its first intent. */
  readonly intents: readonly NewCallIntent[];
  readonly checkpoint: CheckpointWrite | null;
  /** The case's next record, chained to the head the statement compares-and-sets (chainNext). */
  readonly ledger: ChainedRecord | null;
  /** Releases the lease into this state (null: the task keeps running). */
  readonly transition: TransitionWrite | null;
  readonly outbox: readonly OutboxWrite[];
}

/** One task's part of a journal write: the task's fence, its case, and what to write. */
export interface JournalWriteItem extends JournalWrite {
  readonly taskId: string;
  readonly caseId: string;
  readonly owner: string;
  readonly epoch: number;
}

export interface JournalWriteResult {
  idx: number;
  /** The task row was locked at the named owner and epoch. */
  fenced: boolean;
  /** The writes were applied (fenced, and the ledger compare-and-set held). */
  applied: boolean;
  completed: number;
  inserted: number;
  cancel_requested: 'hard' | 'soft' | null;
  row_version: number | null;
  /** With `lockCases`: the state of the applied part's case, read under the case row lock (else absent). */
  case_state?: string | null;
  case_state_reason?: string | null;
}

export interface WriteJournalsOptions {
  /**
   * Also lock the case row of every part whose ledger record was appended, after its head (the
   * order every case-row writer keeps: task, head, case), and return its state — what a
   * case-state refresh in the same transaction needs (caseState.ts, lockCasesForState), without
   * a statement of its own. Default false.
   */
  readonly lockCases?: boolean;
}

/**
 * What turn commits write to the journal — papers, call outcomes, call intents, checkpoint rows
 * and each case's next ledger record with its head — for ONE OR MANY tasks in ONE statement
 * (group commit: a worker writes the commits of all its running tasks that are due together).
 *
 * Every task's part is fenced on its own: `f` locks the task rows still held by the named owner
 * at the named epoch (the predicate of UnitOfWork.requireFence, in task-id order), and each part
 * is written only if its task is in `f` — a stale worker's part writes nothing and the others
 * are unaffected. A ledger record is appended by compare-and-set on its case's head
 * (`seq = expected - 1`); a part whose head moved writes nothing and is redone under the head
 * lock. At most one ledger record per case per statement (the caller guarantees it). Outcomes
 * never overwrite a settled call (except a failed model call, which produced no response);
 * intents never replace an existing one — neither does a withheld call inserted settled, so a
 * journal row already under its key stays the answer. A part may also release its lease (a transition) and
 * enqueue outbox rows; the caller wakes the relays once the statement committed (outboxWake.ts).
 *
 * Paper and outbox bytes travel in ONE binary bytea parameter (every paper's and outbox row's
 * bytes back to back; the JSON parts name each one's offset and length): the driver sends
 * a Buffer as it is, so the bytes are neither converted to text, nor escaped inside the JSON,
 * nor parsed as jsonb by the server — they are copied once each way.
 */
export function writeJournals(items: readonly JournalWriteItem[], opts: WriteJournalsOptions = {}): Sql {
  // JSON parameters carry the batch, one per part: the driver's native JSON.stringify escapes
  // them far cheaper than element-by-element array literals; each parsed once (jsonb), then unpacked.
  const chunks: Buffer[] = [];
  let size = 0;
  /** Appends bytes to the bytes parameter; returns their 1-based offset (for substring) and length. */
  const place = (bytes: Buffer) => {
    chunks.push(bytes);
    size += bytes.length;
    return { off: size - bytes.length + 1, len: bytes.length };
  };
  const batch = {
    t: items.map((it, idx) => ({ idx, task_id: it.taskId, owner: it.owner, epoch: it.epoch, case_id: it.caseId })),
    l: items.flatMap((it, idx) => (it.ledger ? [{ idx, seq: it.ledger.seq, record_id: it.ledger.recordId, kind: it.ledger.kind, body: it.ledger.body ?? {}, prev_hash: it.ledger.prevHash, hash: it.ledger.hash, created_at: it.ledger.createdAt }] : [])),
    p: items.flatMap((it, idx) => it.papers.map((p) => ({ idx, id: p.id, kind: p.kind, name: p.name, schema_id: p.schemaId, hash: p.contentHash, layout: p.layout ?? null, ...place(p.bytes) }))),
    hb: items.flatMap((it, idx) => blocksOf(it.papers).map((b) => ({ idx, hash: b.hash, prev: b.prev, layout: b.layout ?? null, ...place(b.bytes) }))),
    u: items.flatMap((it, idx) =>
      it.completions.flatMap((d) =>
        d.usage ? [{ idx, id: d.id, cost_id: d.usage.costId, route: d.route, model: d.usage.model, input_tokens: d.usage.inputTokens, output_tokens: d.usage.outputTokens, cost: d.usage.cost }] : [],
      ),
    ),
    d: items.flatMap((it, idx) => it.completions.map((d) => ({ idx, id: d.id, status: d.status, paper_id: d.responsePaperId, response_hash: d.responseHash, route: d.route, outcome_class: d.outcomeClass }))),
    i: items.flatMap((it, idx) =>
      it.intents.map((c) => ({
        idx,
        id: c.id,
        turn: c.turn,
        ordinal: c.ordinal,
        kind: c.kind,
        tool_name: c.toolName,
        paper_id: c.requestPaperId,
        request_hash: c.requestHash,
        route: c.route,
        versions: c.versions ?? {},
        ...(c.settled ? { status: c.settled.status, response_paper_id: c.settled.responsePaperId, response_hash: c.settled.responseHash, outcome_class: c.settled.outcomeClass } : {}),
      })),
    ),
    k: items.flatMap((it, idx) => (it.checkpoint ? [{ idx, turn: it.checkpoint.turn, paper_id: it.checkpoint.statePaperId, state_hash: it.checkpoint.stateHash, context_hash: it.checkpoint.contextHash, versions: it.checkpoint.versions ?? {} }] : [])),
    x: items.flatMap((it, idx) => (it.transition ? [{ idx, state: it.transition.state, park_reason: it.transition.parkReason, park_detail: it.transition.parkDetail ?? null, wake_ms: it.transition.wakeAfterMs }] : [])),
    o: items.flatMap((it, idx) => it.outbox.map((o) => ({ idx, message_id: o.messageId, type: o.type, routing_key: o.routingKey, traceparent: o.traceparent ?? null, ...place(o.body) }))),
  };
  // Only the parts this batch has are in the statement (one prepared variant per shape: a C2
  // write has no checkpoint, ledger, transition or outbox): every CTE costs the server executor
  // setup and a pass over the batch even when it has nothing to write. `go` (the parts to write)
  // carries each task's id, case and epoch, so every writing CTE joins it alone — each extra join
  // is a hash table the server builds per statement, which at a few tasks per statement costs
  // more than the rows themselves.
  const has: JournalShape = { C: opts.lockCases === true && batch.l.length > 0, l: batch.l.length > 0, p: batch.p.length > 0, hb: batch.hb.length > 0, d: batch.d.length > 0, u: batch.u.length > 0, i: batch.i.length > 0, k: batch.k.length > 0, x: batch.x.length > 0, o: batch.o.length > 0 };
  const shape = Object.entries(has)
    .filter(([, v]) => v)
    .map(([k]) => k)
    .join('');
  let statement = journalStatements.get(shape);
  if (statement === undefined) {
    statement = journalStatement(has);
    journalStatements.set(shape, statement);
  }
  const values = statement.params.map((key) => (key === 'bytes' ? Buffer.concat(chunks, size) : JSON.stringify(batch[key])));
  return { name: `ev_write_journals_v13_${shape}`, text: statement.text, values };
}

/** Which parts a journal write's batch has (writeJournals): C is the case-row lock of `lockCases`. */
interface JournalShape {
  readonly C: boolean;
  readonly l: boolean;
  readonly p: boolean;
  readonly hb: boolean;
  readonly d: boolean;
  readonly u: boolean;
  readonly i: boolean;
  readonly k: boolean;
  readonly x: boolean;
  readonly o: boolean;
}

/** A batch part sent as a JSON parameter, or `bytes`: every paper's and outbox row's bytes back to back. */
type JournalParam = 't' | 'l' | 'p' | 'hb' | 'u' | 'd' | 'i' | 'k' | 'x' | 'o' | 'bytes';

/**
 * A shape's statement text and the batch part each of its parameters carries, in parameter
 * order. Built once per shape (at most 2^10; a worker meets a handful) and the same string
 * object is sent every time: node-postgres and the pipeline recognise a statement parsed on the
 * connection by comparing its text, and a text of several KB assembled afresh per write was
 * flattened into a copy at that compare — together 5 % of a turn-worker's allocation at half
 * load (bench:turns, V8's sampling heap profiler), i.e. more frequent scavenges.
 */
const journalStatements = new Map<string, { readonly text: string; readonly params: readonly JournalParam[] }>();

function journalStatement(has: JournalShape): { text: string; params: JournalParam[] } {
  // Each part of the batch is a parameter of its own, numbered in the order the CTEs below name
  // them (the same order for every statement of a shape). One JSON parameter read by every CTE
  // (through a CTE of its own or `$1->'part'`) was copied whole at each read — a tuplestore copy
  // per CTE, or, in a custom plan, the part folded out of the whole document while planning —
  // ~1 MB a copy at peak batch sizes: 20–30 % of the statement's execution time.
  const params: JournalParam[] = [];
  const part = (key: Exclude<JournalParam, 'bytes'>) => {
    params.push(key);
    return `$${params.length}::jsonb`;
  };
  let bytesParam: string | undefined;
  const bytes = () => {
    if (bytesParam === undefined) {
      params.push('bytes');
      bytesParam = `$${params.length}::bytea`;
    }
    return bytesParam;
  };
  const ctes = [
    `t AS (
              SELECT x.* FROM jsonb_to_recordset(${part('t')}) AS x(idx int, task_id uuid, owner text, epoch bigint, case_id uuid)
            )`,
    // The fence: each task row locked by an index probe (LATERAL, one per task, in task-id
    // order so concurrent batches lock in the same order). A join to `tasks` would let the
    // cached generic plan scan the whole table. The outer WHERE repeats the probe's owner/epoch
    // test on purpose: it keeps the planner's row estimate of `f` (and so of `go`) at a handful,
    // which keeps the writing CTEs below on index probes too (the plan test checks every shape).
    `f AS (
              SELECT t.idx, t.task_id, t.case_id, t.epoch, k.row_version, k.cancel_requested
                FROM (SELECT * FROM t ORDER BY task_id) t
               CROSS JOIN LATERAL (
                     SELECT k.row_version, k.cancel_requested, k.lease_owner, k.fence_epoch FROM tasks k
                      WHERE k.id = t.task_id AND k.lease_owner = t.owner AND k.fence_epoch = t.epoch
                        FOR NO KEY UPDATE OF k
                     ) k
               WHERE k.lease_owner = t.owner AND k.fence_epoch = t.epoch
            )`,
    ...(has.l
      ? [
          `lg AS (
              SELECT x.* FROM jsonb_to_recordset(${part('l')})
                     AS x(idx int, seq bigint, record_id uuid, kind text, body jsonb, prev_hash text, hash text, created_at timestamptz)
            )`,
          `h_upd AS (
              INSERT INTO ledger_heads (case_id, seq, hash)
              SELECT f.case_id, lg.seq, lg.hash FROM lg JOIN f USING (idx) ORDER BY f.case_id
              ON CONFLICT (case_id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash
               WHERE ledger_heads.seq = EXCLUDED.seq - 1
              RETURNING case_id
            )`,
          `go AS (
              SELECT f.idx, f.task_id, f.case_id, f.epoch FROM f LEFT JOIN lg USING (idx) LEFT JOIN h_upd ON h_upd.case_id = f.case_id
               WHERE lg.idx IS NULL OR h_upd.case_id IS NOT NULL
            )`,
          `l_ins AS (
              INSERT INTO ledger (case_id, seq, record_id, kind, body, prev_hash, hash, created_at)
              SELECT go.case_id, lg.seq, lg.record_id, lg.kind, lg.body, lg.prev_hash, lg.hash, lg.created_at
                FROM lg JOIN go USING (idx)
              RETURNING seq
            )`,
          // The case rows, locked after their heads (reading h_upd makes the upsert run first) by
          // one index probe each, in case-id order.
          ...(has.C
            ? [
                `cs AS (
              SELECT h.case_id, c.state AS case_state, c.state_reason AS case_state_reason
                FROM (SELECT case_id FROM h_upd ORDER BY case_id) h
               CROSS JOIN LATERAL (SELECT c.state, c.state_reason FROM cases c WHERE c.id = h.case_id FOR UPDATE OF c) c
            )`,
              ]
            : []),
        ]
      : [`go AS (SELECT f.idx, f.task_id, f.case_id, f.epoch FROM f)`]),
    ...(has.p
      ? [
          `pp AS (
              SELECT x.* FROM jsonb_to_recordset(${part('p')}) AS x(idx int, id uuid, kind text, name text, schema_id text, hash text, layout text, off int, len int)
            )`,
          `p_ins AS (
              INSERT INTO papers (id, case_id, kind, name, head_revision)
              SELECT pp.id, go.case_id, pp.kind, pp.name, 1 FROM pp JOIN go USING (idx)
              RETURNING id
            )`,
          `r_ins AS (
              INSERT INTO paper_revisions (paper_id, revision, schema_id, content_hash, size_bytes, bytes, layout)
              SELECT pp.id, 1, pp.schema_id, pp.hash, pp.len, substring(${bytes()} FROM pp.off FOR pp.len), pp.layout
                FROM pp JOIN go USING (idx)
              RETURNING paper_id
            )`,
        ]
      : []),
    // History and span blocks (0018, 0022) the part's manifests name, stored once per case: a
    // block already there (the same key, written by an earlier turn or another manifest) is kept as it is.
    ...(has.hb
      ? [
          `hb_ins AS (
              INSERT INTO history_blocks (case_id, hash, prev, size_bytes, bytes, layout)
              SELECT go.case_id, x.hash, x.prev, x.len, substring(${bytes()} FROM x.off FOR x.len), x.layout
                FROM jsonb_to_recordset(${part('hb')}) AS x(idx int, hash text, prev text, layout text, off int, len int)
                JOIN go USING (idx)
              ON CONFLICT (case_id, hash) DO NOTHING
              RETURNING hash
            )`,
        ]
      : []),
    ...(has.d
      ? [
          `c_upd AS (
              UPDATE runtime_calls c
                 SET status = y.status, response_paper_id = y.paper_id, response_hash = y.response_hash,
                     route = COALESCE(y.route, c.route), outcome_class = y.outcome_class, completed_at = now()
                FROM (SELECT x.*, go.task_id
                        FROM jsonb_to_recordset(${part('d')}) AS x(idx int, id uuid, status text, paper_id uuid, response_hash text, route text, outcome_class text)
                        JOIN go USING (idx)) y
               WHERE c.id = y.id AND c.task_id = y.task_id
                 AND (c.status = 'intent' OR (c.kind = 'model' AND c.status = 'failed'))
              RETURNING y.idx, y.id
            )`,
          // A model call's cost row goes with its response: only a completion that applied
          // (a call answered once is charged once; a stale part writes neither).
          ...(has.u
            ? [
                `u_ins AS (
              INSERT INTO cost_ledger (id, case_id, task_id, call_id, route, model, input_tokens, output_tokens, cost)
              SELECT x.cost_id, go.case_id, go.task_id, x.id, COALESCE(x.route, ''), x.model, x.input_tokens, x.output_tokens, x.cost
                FROM jsonb_to_recordset(${part('u')})
                     AS x(idx int, id uuid, cost_id uuid, route text, model text, input_tokens int, output_tokens int, cost numeric)
                JOIN go USING (idx)
               WHERE x.id IN (SELECT c_upd.id FROM c_upd)
              ON CONFLICT (call_id) WHERE call_id IS NOT NULL DO NOTHING
              RETURNING id
            )`,
              ]
            : []),
        ]
      : []),
    ...(has.i
      ? [
          `c_ins AS (
              INSERT INTO runtime_calls (id, task_id, turn, ordinal, kind, tool_name, status, fence_epoch, request_paper_id, request_hash, route, versions,
                                         response_paper_id, response_hash, outcome_class, completed_at)
              SELECT x.id, go.task_id, x.turn, x.ordinal, x.kind, x.tool_name, COALESCE(x.status, 'intent'), go.epoch, x.paper_id, x.request_hash, x.route, x.versions,
                     x.response_paper_id, x.response_hash, x.outcome_class, CASE WHEN x.status IS NULL THEN NULL ELSE now() END
                FROM jsonb_to_recordset(${part('i')})
                     AS x(idx int, id uuid, turn int, ordinal int, kind text, tool_name text, paper_id uuid, request_hash text, route text, versions jsonb,
                          status text, response_paper_id uuid, response_hash text, outcome_class text)
                JOIN go USING (idx)
              ON CONFLICT (task_id, turn, ordinal) DO NOTHING
              RETURNING task_id
            )`,
        ]
      : []),
    ...(has.k
      ? [
          `k_ins AS (
              INSERT INTO turn_checkpoints (task_id, turn, state_paper_id, state_hash, context_hash, fence_epoch, versions)
              SELECT go.task_id, x.turn, x.paper_id, x.state_hash, x.context_hash, go.epoch, x.versions
                FROM jsonb_to_recordset(${part('k')}) AS x(idx int, turn int, paper_id uuid, state_hash text, context_hash text, versions jsonb)
                JOIN go USING (idx)
              RETURNING task_id
            )`,
        ]
      : []),
    ...(has.x
      ? [
          `tr_upd AS (
              UPDATE tasks k
                 SET state = y.state, park_reason = y.park_reason, park_detail = y.park_detail,
                     parked_at = CASE WHEN y.state = 'parked' THEN now() ELSE NULL END,
                     wake_at = CASE WHEN y.wake_ms IS NULL THEN NULL ELSE now() + make_interval(secs => y.wake_ms / 1000) END,
                     lease_owner = NULL, lease_until = NULL, row_version = k.row_version + 1, updated_at = now()
                FROM (SELECT x.*, go.task_id
                        FROM jsonb_to_recordset(${part('x')}) AS x(idx int, state text, park_reason text, park_detail jsonb, wake_ms float8)
                        JOIN go USING (idx)) y
               WHERE k.id = y.task_id
              RETURNING y.idx
            )`,
        ]
      : []),
    ...(has.o
      ? [
          `o_ins AS (
              INSERT INTO outbox_messages (message_id, type, routing_key, case_id, body, traceparent)
              SELECT x.message_id, x.type, x.routing_key, go.case_id, substring(${bytes()} FROM x.off FOR x.len), x.traceparent
                FROM jsonb_to_recordset(${part('o')}) AS x(idx int, message_id uuid, type text, routing_key text, traceparent text, off int, len int)
                JOIN go USING (idx)
              RETURNING seq
            )`,
        ]
      : []),
  ];
  // Data-modifying CTEs run to completion whether or not the final query reads them.
  return {
    params,
    text: `WITH ${ctes.join(',\n            ')}
            SELECT t.idx, f.idx IS NOT NULL AS fenced, go.idx IS NOT NULL AS applied,
                   ${has.d ? '(SELECT count(*) FROM c_upd WHERE c_upd.idx = t.idx)::int' : '0'} AS completed,
                   ${has.i ? '(SELECT count(*) FROM c_ins WHERE c_ins.task_id = t.task_id)::int' : '0'} AS inserted,
                   f.cancel_requested, f.row_version${has.C ? ', cs.case_state, cs.case_state_reason' : ''}
              FROM t LEFT JOIN f USING (idx) LEFT JOIN go USING (idx)${has.C ? ' LEFT JOIN cs ON cs.case_id = go.case_id' : ''}
             ORDER BY t.idx`,
  };
}

/**
 * The fence a turn's unit of work holds (the predicate of UnitOfWork.requireFence, the row locked
 * until COMMIT), with what the turn decides on under it: the row version and a pending cancel.
 */
export function lockHeldFence(taskId: string, owner: string, epoch: number): Sql {
  return {
    name: 'ev_lock_held_fence',
    text: `SELECT row_version, cancel_requested FROM tasks
            WHERE id = $1::uuid AND lease_owner = $2::text AND fence_epoch = $3::bigint
              FOR NO KEY UPDATE`,
    values: [taskId, owner, epoch],
  };
}

/**
 * An open model intent that was never answered may be superseded by the request actually sent
 * (e.g. the agent's route changed before the call): its request paper, hash, route and versions
 * are replaced. A call that has a response is never touched.
 */
export function supersedeModelIntent(callId: string, taskId: string, requestPaperId: string, requestHash: string, route: string | null, versions: unknown): Sql {
  return {
    name: 'ev_supersede_model_intent',
    text: `UPDATE runtime_calls SET request_paper_id = $3::uuid, request_hash = $4::text, route = $5::text, versions = $6::jsonb
            WHERE id = $1::uuid AND task_id = $2::uuid AND ordinal = 0 AND status IN ('intent', 'failed')
        RETURNING id`,
    values: [callId, taskId, requestPaperId, requestHash, route, JSON.stringify(versions ?? {})],
  };
}

/** The RUNTIME_CALLS columns every read of the journal returns. */
export interface CallColumns {
  id: string;
  turn: number;
  ordinal: number;
  kind: 'model' | 'read' | 'control' | 'effect';
  tool_name: string | null;
  status: string;
  fence_epoch: number;
  request_hash: string | null;
  response_hash: string | null;
  route: string | null;
  versions: unknown;
}

export interface JournalRow extends CallColumns {
  request_bytes: Buffer | null;
  request_content_hash: string | null;
  response_bytes: Buffer | null;
  response_content_hash: string | null;
  completed_at: Date | null;
}

/**
 * The document bytes of the paper revision aliased `r` (SQL): its bytes, or a history manifest
 * reassembled by `paper_document()` (NULL when a block is missing). The revision's content hash
 * is the document's, so the caller's verification covers the blocks.
 */
export const documentOf = (r: string) => `CASE WHEN ${r}.layout IS NULL THEN ${r}.bytes ELSE paper_document(${r}.paper_id, ${r}.revision) END`;

/** Every call of one turn with its request and response bytes (head revisions). */
export function selectTurnCalls(taskId: string, turn: number): Sql {
  return {
    name: 'ev_select_turn_calls_v2',
    text: `SELECT c.id, c.turn, c.ordinal, c.kind, c.tool_name, c.status, c.fence_epoch, c.request_hash, c.response_hash,
                  c.route, c.versions, c.completed_at,
                  ${documentOf('rq')} AS request_bytes, rq.content_hash AS request_content_hash,
                  ${documentOf('rs')} AS response_bytes, rs.content_hash AS response_content_hash
             FROM runtime_calls c
             LEFT JOIN papers pq ON pq.id = c.request_paper_id
             LEFT JOIN paper_revisions rq ON rq.paper_id = pq.id AND rq.revision = pq.head_revision
             LEFT JOIN papers ps ON ps.id = c.response_paper_id
             LEFT JOIN paper_revisions rs ON rs.paper_id = ps.id AND rs.revision = ps.head_revision
            WHERE c.task_id = $1::uuid AND c.turn = $2::int
            ORDER BY c.ordinal`,
    values: [taskId, turn],
  };
}
