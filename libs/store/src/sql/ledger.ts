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

/** Head row, locked for the rest of the unit of work: one appender per case at a time. */
export function lockLedgerHead(caseId: string): Sql {
  return { name: 'ev_lock_ledger_head', text: 'SELECT seq, hash FROM ledger_heads WHERE case_id = $1::uuid FOR UPDATE', values: [caseId] };
}

/** Every case starts with an empty chain whose head is the genesis hash. */
export function insertLedgerGenesis(caseId: string): Sql {
  return { text: `INSERT INTO ledger_heads (case_id, seq, hash) VALUES ($1::uuid, 0, $2::text) ON CONFLICT DO NOTHING`, values: [caseId, LEDGER_GENESIS] };
}

export function selectLedgerRecord(recordId: string): Sql {
  return { text: 'SELECT * FROM ledger WHERE record_id = $1::uuid', values: [recordId] };
}

export function insertLedger(r: { caseId: string; seq: number; recordId: string; kind: string; body: unknown; prevHash: string; hash: string; createdAt: string }): Sql {
  return {
    name: 'ev_insert_ledger',
    text: `INSERT INTO ledger (case_id, seq, record_id, kind, body, prev_hash, hash, created_at)
           VALUES ($1::uuid, $2::bigint, $3::uuid, $4::text, $5::jsonb, $6::text, $7::text, $8::timestamptz)`,
    values: [r.caseId, r.seq, r.recordId, r.kind, JSON.stringify(r.body), r.prevHash, r.hash, r.createdAt],
  };
}

export function upsertLedgerHead(caseId: string, seq: number, hash: string): Sql {
  return {
    name: 'ev_upsert_ledger_head',
    text: `INSERT INTO ledger_heads (case_id, seq, hash) VALUES ($1::uuid, $2::bigint, $3::text)
           ON CONFLICT (case_id) DO UPDATE SET seq = EXCLUDED.seq, hash = EXCLUDED.hash
           WHERE ledger_heads.seq < EXCLUDED.seq`,
    values: [caseId, seq, hash],
  };
}

export function selectLedger(caseId: string, afterSeq = 0, limit = 1000): Sql {
  return {
    text: 'SELECT * FROM ledger WHERE case_id = $1::uuid AND seq > $2::bigint ORDER BY seq LIMIT $3::int',
    values: [caseId, afterSeq, limit],
  };
}
