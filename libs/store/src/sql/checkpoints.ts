/**
 * TURN_CHECKPOINTS statements (seed 004 §2.2). A checkpoint row (task, turn) pins the runtime
 * state a task resumes from before running `turn`: its state paper, the hash that verifies the
 * paper's bytes, the hash of the model request that produced it, and the versions it was taken
 * under. Rows are immutable; the highest turn is the one a worker restores.
 */
import type { Sql } from '../db.js';

export interface CheckpointRow {
  turn: number;
  state_paper_id: string;
  state_hash: string;
  context_hash: string | null;
  versions: unknown;
  fence_epoch: number;
  /** NULL when the paper revision is gone (a restore failure, never a guess). */
  bytes: Buffer | null;
  content_hash: string | null;
}

/** The latest checkpoint of a task with its state bytes. */
export function selectLatestCheckpoint(taskId: string): Sql {
  return {
    name: 'ev_select_latest_checkpoint',
    text: `SELECT k.turn, k.state_paper_id, k.state_hash, k.context_hash, k.versions, k.fence_epoch, r.bytes, r.content_hash
             FROM turn_checkpoints k
             LEFT JOIN papers p ON p.id = k.state_paper_id
             LEFT JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
            WHERE k.task_id = $1::uuid
            ORDER BY k.turn DESC LIMIT 1`,
    values: [taskId],
  };
}

export interface RestoreRow {
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

/**
 * What a restore reads in one round trip: the latest checkpoint with its state bytes (NULL
 * columns when there is none), the case type, and the case's ledger head.
 */
export function selectRestorePoint(taskId: string, caseId: string): Sql {
  return {
    name: 'ev_select_restore_point',
    text: `SELECT k.turn, k.state_paper_id, k.state_hash, k.context_hash, k.versions, k.fence_epoch, r.bytes, r.content_hash,
                  c.case_type, h.seq AS head_seq, h.hash AS head_hash
             FROM cases c
             LEFT JOIN LATERAL (SELECT * FROM turn_checkpoints WHERE task_id = $1::uuid ORDER BY turn DESC LIMIT 1) k ON true
             LEFT JOIN papers p ON p.id = k.state_paper_id
             LEFT JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
             LEFT JOIN ledger_heads h ON h.case_id = c.id
            WHERE c.id = $2::uuid`,
    values: [taskId, caseId],
  };
}

export function checkpointExists(taskId: string, turn: number): Sql {
  return { name: 'ev_checkpoint_exists', text: 'SELECT 1 AS x FROM turn_checkpoints WHERE task_id = $1::uuid AND turn = $2::int', values: [taskId, turn] };
}

/** All checkpoint turns of a task, ascending (gap checks, operators). */
export function selectCheckpointTurns(taskId: string): Sql {
  return { text: 'SELECT turn, fence_epoch, state_hash FROM turn_checkpoints WHERE task_id = $1::uuid ORDER BY turn', values: [taskId] };
}
