/**
 * ONE task's journal write as a statement of plain parameters: the shape a group commit sends
 * when a single task's write is due (at low load, most statements).
 *
 * It writes exactly what `writeJournals` writes for a batch of one (same fence, same ledger
 * compare-and-set, same rules for outcomes and intents, same result row), so the committer may
 * send either. The difference is the plan: the batch statement decodes a JSON document into
 * rows and joins them (hash joins sized for hundreds of tasks; the fence join scans `tasks`
 * whenever the planner judges the table small, and a cached generic plan keeps that judgement
 * as the table grows), whereas here every row the statement reads is found by a parameter
 * equal to a unique key — the fenced task by id, the settled call by id — which the planner
 * serves with an index probe at any table size. `npm run bench:journal` (a turn's two writes
 * against 1,000 tasks, one statement at a time): 0.54–0.60 ms of server CPU per statement,
 * against 0.82–1.00 ms for the batch statement carrying the same single write (and 0.36–0.39 ms
 * per write when the batch statement carries four: batching still wins when there is a batch).
 *
 * Only a write with at most one call outcome goes this way (an UPDATE joined to a list of ids
 * would bring the size-dependent join back); any other is written by `writeJournals`.
 */
import type { Sql } from '../db.js';
import { writeJournals } from './journal.js';
import type { JournalWriteItem } from './journal.js';
import { OUTBOX_CHANNEL } from './outbox.js';

/** Positional parameters, each cast where it is used: `p(v, 'uuid')` → `$n::uuid`. */
class Params {
  readonly values: unknown[] = [];
  p(value: unknown, type: string): string {
    this.values.push(value);
    return `$${this.values.length}::${type}`;
  }
}

/** The statement for one or many task writes: the one-task shape when it applies. */
export function journalStatement(items: readonly JournalWriteItem[]): Sql {
  return (items.length === 1 ? writeJournal(items[0]!) : null) ?? writeJournals(items);
}

const ps = <T>(it: JournalWriteItem, f: (p: JournalWriteItem['papers'][number]) => T): T[] => it.papers.map(f);

/** One task's write (result row: idx 0, as `writeJournals` returns it); null when it has more than one call outcome. */
export function writeJournal(it: JournalWriteItem): Sql | null {
  if (it.completions.length > 1) return null;
  const q = new Params();
  // Paper and outbox bytes travel back to back in ONE bytea parameter (see writeJournals).
  const chunks: Buffer[] = [];
  let size = 0;
  const place = (bytes: Buffer) => {
    chunks.push(bytes);
    size += bytes.length;
    return size - bytes.length + 1;
  };
  const paperOffsets = it.papers.map((p) => place(p.bytes));
  const outboxOffsets = it.outbox.map((o) => place(o.body));
  const blob = chunks.length > 0 ? q.p(Buffer.concat(chunks, size), 'bytea') : '';
  const epoch = q.p(it.epoch, 'bigint');

  const ctes: string[] = [
    `f AS (
              SELECT k.id, k.case_id, k.row_version, k.cancel_requested FROM tasks k
               WHERE k.id = ${q.p(it.taskId, 'uuid')} AND k.lease_owner = ${q.p(it.owner, 'text')} AND k.fence_epoch = ${epoch}
                 FOR NO KEY UPDATE
            )`,
  ];
  const shape: string[] = [];
  const l = it.ledger;
  if (l) {
    shape.push('l');
    const seq = q.p(l.seq, 'bigint');
    const hash = q.p(l.hash, 'text');
    ctes.push(
      `h_upd AS (
              INSERT INTO ledger_heads (case_id, seq, hash) SELECT f.case_id, ${seq}, ${hash} FROM f
              ON CONFLICT (case_id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash
               WHERE ledger_heads.seq = EXCLUDED.seq - 1
              RETURNING case_id
            )`,
      `go AS (SELECT f.id, f.case_id FROM f WHERE EXISTS (SELECT 1 FROM h_upd))`,
      `l_ins AS (
              INSERT INTO ledger (case_id, seq, record_id, kind, body, prev_hash, hash, created_at)
              SELECT go.case_id, ${seq}, ${q.p(l.recordId, 'uuid')}, ${q.p(l.kind, 'text')}, ${q.p(JSON.stringify(l.body ?? {}), 'jsonb')},
                     ${q.p(l.prevHash, 'text')}, ${hash}, ${q.p(l.createdAt, 'timestamptz')}
                FROM go
              RETURNING seq
            )`,
    );
  } else {
    ctes.push(`go AS (SELECT f.id, f.case_id FROM f)`);
  }
  if (it.papers.length > 0) {
    shape.push('p');
    const ids = q.p(ps(it, (p) => p.id), 'uuid[]');
    const kinds = q.p(ps(it, (p) => p.kind), 'text[]');
    const names = q.p(ps(it, (p) => p.name), 'text[]');
    const schemas = q.p(ps(it, (p) => p.schemaId), 'text[]');
    const hashes = q.p(ps(it, (p) => p.contentHash), 'text[]');
    const offs = q.p(paperOffsets, 'int[]');
    const lens = q.p(ps(it, (p) => p.bytes.length), 'int[]');
    ctes.push(
      `p_ins AS (
              INSERT INTO papers (id, case_id, kind, name, head_revision)
              SELECT x.id, go.case_id, x.kind, x.name, 1 FROM go, unnest(${ids}, ${kinds}, ${names}) AS x(id, kind, name)
              RETURNING id
            )`,
      `r_ins AS (
              INSERT INTO paper_revisions (paper_id, revision, schema_id, content_hash, size_bytes, bytes)
              SELECT x.id, 1, x.schema_id, x.hash, x.len, substring(${blob} FROM x.off FOR x.len)
                FROM go, unnest(${ids}, ${schemas}, ${hashes}, ${offs}, ${lens}) AS x(id, schema_id, hash, off, len)
              RETURNING paper_id
            )`,
    );
  }
  const d = it.completions[0];
  if (d) {
    shape.push('d');
    ctes.push(
      `c_upd AS (
              UPDATE runtime_calls c
                 SET status = ${q.p(d.status, 'text')}, response_paper_id = ${q.p(d.responsePaperId, 'uuid')}, response_hash = ${q.p(d.responseHash, 'text')},
                     route = COALESCE(${q.p(d.route, 'text')}, c.route), outcome_class = ${q.p(d.outcomeClass, 'text')}, completed_at = now()
                FROM go
               WHERE c.id = ${q.p(d.id, 'uuid')} AND c.task_id = go.id
                 AND (c.status = 'intent' OR (c.kind = 'model' AND c.status = 'failed'))
              RETURNING c.id
            )`,
    );
  }
  if (it.intents.length > 0) {
    shape.push('i');
    const col = <T>(f: (c: JournalWriteItem['intents'][number]) => T, type: string) => q.p(it.intents.map(f), type);
    // An insert finds its conflict through the unique index itself: no lookup to plan.
    ctes.push(
      `c_ins AS (
              INSERT INTO runtime_calls (id, task_id, turn, ordinal, kind, tool_name, status, fence_epoch, request_paper_id, request_hash, route, versions)
              SELECT x.id, go.id, x.turn, x.ordinal, x.kind, x.tool_name, 'intent', ${epoch}, x.paper_id, x.request_hash, x.route, x.versions
                FROM go, unnest(${col((c) => c.id, 'uuid[]')}, ${col((c) => c.turn, 'int[]')}, ${col((c) => c.ordinal, 'int[]')}, ${col((c) => c.kind, 'text[]')},
                                ${col((c) => c.toolName, 'text[]')}, ${col((c) => c.requestPaperId, 'uuid[]')}, ${col((c) => c.requestHash, 'text[]')},
                                ${col((c) => c.route, 'text[]')}, ${col((c) => JSON.stringify(c.versions ?? {}), 'jsonb[]')})
                     AS x(id, turn, ordinal, kind, tool_name, paper_id, request_hash, route, versions)
              ON CONFLICT (task_id, turn, ordinal) DO NOTHING
              RETURNING id
            )`,
    );
  }
  const k = it.checkpoint;
  if (k) {
    shape.push('k');
    ctes.push(
      `k_ins AS (
              INSERT INTO turn_checkpoints (task_id, turn, state_paper_id, state_hash, context_hash, fence_epoch, versions)
              SELECT go.id, ${q.p(k.turn, 'int')}, ${q.p(k.statePaperId, 'uuid')}, ${q.p(k.stateHash, 'text')}, ${q.p(k.contextHash, 'text')}, ${epoch},
                     ${q.p(JSON.stringify(k.versions ?? {}), 'jsonb')}
                FROM go
              RETURNING task_id
            )`,
    );
  }
  const x = it.transition;
  if (x) {
    shape.push('x');
    const state = q.p(x.state, 'text');
    const wake = q.p(x.wakeAfterMs, 'float8');
    ctes.push(
      `tr_upd AS (
              UPDATE tasks k
                 SET state = ${state}, park_reason = ${q.p(x.parkReason, 'text')}, park_detail = ${q.p(x.parkDetail === null || x.parkDetail === undefined ? null : JSON.stringify(x.parkDetail), 'jsonb')},
                     parked_at = CASE WHEN ${state} = 'parked' THEN now() ELSE NULL END,
                     wake_at = CASE WHEN ${wake} IS NULL THEN NULL ELSE now() + make_interval(secs => ${wake} / 1000) END,
                     lease_owner = NULL, lease_until = NULL, row_version = k.row_version + 1, updated_at = now()
                FROM go
               WHERE k.id = go.id
              RETURNING k.id
            )`,
    );
  }
  if (it.outbox.length > 0) {
    shape.push('o');
    const ids = q.p(it.outbox.map((o) => o.messageId), 'uuid[]');
    const types = q.p(it.outbox.map((o) => o.type), 'text[]');
    const keys = q.p(it.outbox.map((o) => o.routingKey), 'text[]');
    const offs = q.p(outboxOffsets, 'int[]');
    const lens = q.p(it.outbox.map((o) => o.body.length), 'int[]');
    ctes.push(
      `o_ins AS (
              INSERT INTO outbox_messages (message_id, type, routing_key, case_id, body)
              SELECT x.message_id, x.type, x.routing_key, go.case_id, substring(${blob} FROM x.off FOR x.len)
                FROM go, unnest(${ids}, ${types}, ${keys}, ${offs}, ${lens}) AS x(message_id, type, routing_key, off, len)
              RETURNING seq
            )`,
      // A SELECT in WITH runs only if referenced: the final query reads `notified`.
      `notified AS (
              SELECT count(pg_notify('${OUTBOX_CHANNEL}', '')) AS n FROM (SELECT 1 FROM o_ins LIMIT 1) z
            )`,
    );
  }
  // Data-modifying CTEs run to completion whether or not the final query reads them.
  return {
    name: `ev_write_journal_one_v1_${shape.join('')}`,
    text: `WITH ${ctes.join(',\n            ')}
            SELECT 0 AS idx, EXISTS (SELECT 1 FROM f) AS fenced, EXISTS (SELECT 1 FROM go) AS applied,
                   ${d ? '(SELECT count(*) FROM c_upd)::int' : '0'} AS completed,
                   ${it.intents.length > 0 ? '(SELECT count(*) FROM c_ins)::int' : '0'} AS inserted,
                   (SELECT cancel_requested FROM f) AS cancel_requested, (SELECT row_version FROM f) AS row_version${it.outbox.length > 0 ? ', (SELECT n FROM notified) AS notified' : ''}`,
    values: q.values,
  };
}
