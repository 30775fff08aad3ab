/** Ledger statements: append at the chain head; the head row tracks the last seq and hash. */
import { LEDGER_GENESIS } from '../ledgerHash.js';
import type { Sql } from '../db.js';

export interface LedgerRow {
  case_id: string;
  seq: number;
  record_id: string;
  kind: string;
  body: unknown;
  prev_hash: string;
  hash: string;
  created_at: Date;
}

export function selectLedgerHead(caseId: string): Sql {
  return { name: 'ev_ledger_head', text: 'SELECT seq, hash FROM ledger_heads WHERE case_id = $1::uuid', values: [caseId] };
}

/** The heads of several cases (a live-ledger feed's poll); an unknown case has no row. */
export function selectLedgerHeads(caseIds: readonly string[]): Sql {
  return { name: 'ev_ledger_heads', text: 'SELECT case_id::text AS case_id, seq FROM ledger_heads WHERE case_id = ANY($1::uuid[])', values: [caseIds] };
}

/** Head row, locked for the rest of the unit of work: one appender per case at a time. */
export function lockLedgerHead(caseId: string): Sql {
  return { name: 'ev_lock_ledger_head', text: 'SELECT seq, hash FROM ledger_heads WHERE case_id = $1::uuid FOR UPDATE', values: [caseId] };
}

/** Every case starts with an empty chain whose head is the genesis hash. */
export function insertLedgerGenesis(caseId: string): Sql {
  return { text: `INSERT INTO ledger_heads (case_id, seq, hash) VALUES ($1::uuid, 0, $2::text) ON CONFLICT DO NOTHING`, values: [caseId, LEDGER_GENESIS] };
}

/** What an append finds under the head lock: the head, and the record when its id is already chained. */
export interface LedgerHeadForAppend {
  seq: number | null;
  hash: string | null;
  record_seq: number | null;
  record_hash: string | null;
}

/**
 * The head of a case's chain, locked until COMMIT, and — in the same round trip — the record
 * `recordId` names if it is already chained (an append of it is then answered with it, never
 * repeated). Always one row; `seq` is null for a case with no head row yet.
 */
export function lockLedgerHeadForAppend(caseId: string, recordId: string): Sql {
  return {
    name: 'ev_lock_ledger_head_for_append',
    text: `WITH h AS MATERIALIZED (SELECT seq, hash FROM ledger_heads WHERE case_id = $1::uuid FOR UPDATE)
           SELECT (SELECT seq FROM h) AS seq, (SELECT hash FROM h) AS hash,
                  (SELECT seq FROM ledger WHERE record_id = $2::uuid) AS record_seq,
                  (SELECT hash FROM ledger WHERE record_id = $2::uuid) AS record_hash`,
    values: [caseId, recordId],
  };
}

export interface LedgerAppendResult {
  inserted: number;
  moved: number;
}

/**
 * Chains one record and moves the head to it in ONE statement, valid only under the head lock.
 * A conflict (its seq or its record id already stored: a writer that did not take the lock)
 * inserts nothing and raises nothing — `inserted` 0, and the caller re-reads the head — so the
 * transaction needs no savepoint. `moved` 0 with `inserted` 1 would mean a head ahead of its
 * own chain: the caller refuses it.
 */
export function appendLedgerRecord(r: { caseId: string; seq: number; recordId: string; kind: string; body: unknown; prevHash: string; hash: string; createdAt: string }): Sql {
  return {
    name: 'ev_append_ledger_record',
    text: `WITH ins AS (
             INSERT INTO ledger (case_id, seq, record_id, kind, body, prev_hash, hash, created_at)
             VALUES ($1::uuid, $2::bigint, $3::uuid, $4::text, $5::jsonb, $6::text, $7::text, $8::timestamptz)
             ON CONFLICT DO NOTHING
             RETURNING case_id, seq, hash
           ), head AS (
             INSERT INTO ledger_heads (case_id, seq, hash) SELECT case_id, seq, hash FROM ins
             ON CONFLICT (case_id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash
             WHERE ledger_heads.seq < EXCLUDED.seq
             RETURNING seq
           )
           SELECT (SELECT count(*) FROM ins)::int AS inserted, (SELECT count(*) FROM head)::int AS moved`,
    values: [r.caseId, r.seq, r.recordId, r.kind, JSON.stringify(r.body), r.prevHash, r.hash, r.createdAt],
  };
}

export function selectLedger(caseId: string, afterSeq = 0, limit = 1000): Sql {
  return {
    text: 'SELECT * FROM ledger WHERE case_id = $1::uuid AND seq > $2::bigint ORDER BY seq LIMIT $3::int',
    values: [caseId, afterSeq, limit],
  };
}

/**
 * appendLedgerRecord for records of DISTINCT cases in one statement, each under its case's head
 * lock. `skip`: a record that conflicts is skipped (not an error); `moved` tells the rest, and
 * the caller appends a skipped one on its own. `strict`: a conflict fails the statement (the
 * ledger's key: a chain only grows by its next seq, so a head that moved past a record's seq
 * left a row at that seq), for a caller that sends COMMIT in the same round trip.
 */
export function appendLedgerRecords(
  rs: readonly { caseId: string; seq: number; recordId: string; kind: string; body: unknown; prevHash: string; hash: string; createdAt: string }[],
  mode: 'skip' | 'strict' = 'skip',
): Sql {
  return {
    name: mode === 'skip' ? 'ev_append_ledger_records' : 'ev_append_ledger_records_strict',
    text: APPEND_LEDGER_RECORDS[mode],
    values: [
      rs.map((r) => r.caseId),
      rs.map((r) => r.seq),
      rs.map((r) => r.recordId),
      rs.map((r) => r.kind),
      rs.map((r) => JSON.stringify(r.body)),
      rs.map((r) => r.prevHash),
      rs.map((r) => r.hash),
      rs.map((r) => r.createdAt),
    ],
  };
}

/** appendLedgerRecords' texts by mode, built once (a text built per call is flattened at every compare with the parsed one). */
const APPEND_LEDGER_RECORDS = {
  skip: appendLedgerRecordsText('\n             ON CONFLICT DO NOTHING'),
  strict: appendLedgerRecordsText(''),
} as const;

function appendLedgerRecordsText(onConflict: string): string {
  return `WITH ins AS (
             INSERT INTO ledger (case_id, seq, record_id, kind, body, prev_hash, hash, created_at)
             SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::uuid[], $4::text[], $5::jsonb[], $6::text[], $7::text[], $8::timestamptz[])${onConflict}
             RETURNING case_id, seq, hash, record_id
           ), head AS (
             INSERT INTO ledger_heads (case_id, seq, hash) SELECT case_id, seq, hash FROM ins
             ON CONFLICT (case_id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash
             WHERE ledger_heads.seq < EXCLUDED.seq
             RETURNING case_id
           )
           SELECT ins.record_id, EXISTS (SELECT 1 FROM head WHERE head.case_id = ins.case_id) AS moved FROM ins`;
}
