/**
 * TURN_CHECKPOINTS statements (seed 004 §2.2). A checkpoint row (task, turn) pins the runtime
 * state a task resumes from before running `turn`: its state paper, the hash that verifies the
 * paper's bytes, the hash of the model request that produced it, and the versions it was taken
 * under. Rows are immutable; the highest turn is the one a worker restores.
 */
import type { Sql } from '../db.js';
import { documentOf } from './journal.js';
import type { CallColumns } from './journal.js';

export interface RestoreRow {
  /** The journal of the turn to run next, as JSON (bytes base64), or null when empty. */
  calls: RestoreCallJson[] | null;
  /** The notes that turn's request carries (pinned to it, else every open one), or null. */
  notes: { seq: number; kind: string; body: unknown; consumed_turn: number | null }[] | null;
  /** NULL when the task has no checkpoint yet. */
  turn: number | null;
  state_paper_id: string | null;
  state_hash: string | null;
  context_hash: string | null;
  versions: unknown;
  fence_epoch: number | null;
  bytes: Buffer | null;
  content_hash: string | null;
  case_type: string;
  head_seq: number | null;
  head_hash: string | null;
}

export interface RestoreCallJson extends CallColumns {
  completed_at: string | null;
  request: string | null;
  request_content_hash: string | null;
  response: string | null;
  response_content_hash: string | null;
}

/**
 * Everything a restore reads, in ONE round trip: the latest checkpoint with its state bytes
 * (a history manifest reassembled from its blocks: `documentOf`, NULL when a block is missing)
 * (NULL columns when there is none), the journal of the turn it resumes (bytes base64), the
 * notes that turn carries, the case type, and the case's ledger head. `heldStateHash`: the state
 * the caller holds in memory; when it is the latest checkpoint's, its bytes are not reassembled
 * nor sent (NULL).
 */
export function selectRestorePoint(taskId: string, caseId: string, heldStateHash: string | null = null): Sql {
  return {
    name: 'ev_select_restore_point_v4',
    text: `WITH k AS (SELECT * FROM turn_checkpoints WHERE task_id = $1::uuid ORDER BY turn DESC LIMIT 1),
                 nt AS (SELECT COALESCE((SELECT turn FROM k), 0) AS turn),
                 pinned AS (SELECT 1 FROM task_notes WHERE task_id = $1::uuid AND consumed_turn = (SELECT turn FROM nt) LIMIT 1)
           SELECT k.turn, k.state_paper_id, k.state_hash, k.context_hash, k.versions, k.fence_epoch,
                  CASE WHEN k.state_hash = $3::text THEN NULL ELSE ${documentOf('r')} END AS bytes, r.content_hash,
                  c.case_type, h.seq AS head_seq, h.hash AS head_hash,
                  (SELECT json_agg(json_build_object(
                            'id', x.id, 'turn', x.turn, 'ordinal', x.ordinal, 'kind', x.kind, 'tool_name', x.tool_name, 'status', x.status,
                            'fence_epoch', x.fence_epoch, 'request_hash', x.request_hash, 'response_hash', x.response_hash, 'route', x.route,
                            'versions', x.versions, 'completed_at', x.completed_at,
                            'request', encode(${documentOf('rq')}, 'base64'), 'request_content_hash', rq.content_hash,
                            'response', encode(${documentOf('rs')}, 'base64'), 'response_content_hash', rs.content_hash) ORDER BY x.ordinal)
                     FROM runtime_calls x
                     LEFT JOIN papers pq ON pq.id = x.request_paper_id
                     LEFT JOIN paper_revisions rq ON rq.paper_id = pq.id AND rq.revision = pq.head_revision
                     LEFT JOIN papers ps ON ps.id = x.response_paper_id
                     LEFT JOIN paper_revisions rs ON rs.paper_id = ps.id AND rs.revision = ps.head_revision
                    WHERE x.task_id = $1::uuid AND x.turn = (SELECT turn FROM nt)) AS calls,
                  (SELECT json_agg(json_build_object('seq', n.seq, 'kind', n.kind, 'body', n.body, 'consumed_turn', n.consumed_turn) ORDER BY n.seq)
                     FROM task_notes n
                    WHERE n.task_id = $1::uuid
                      AND (n.consumed_turn = (SELECT turn FROM nt) OR (n.consumed_turn IS NULL AND NOT EXISTS (SELECT 1 FROM pinned)))) AS notes
             FROM cases c
             LEFT JOIN k ON true
             LEFT JOIN papers p ON p.id = k.state_paper_id
             LEFT JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
             LEFT JOIN ledger_heads h ON h.case_id = c.id
            WHERE c.id = $2::uuid`,
    values: [taskId, caseId, heldStateHash],
  };
}
