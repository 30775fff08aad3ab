/**
 * The receipts table in the TARGET database and its statements (pure builders: text + values).
 *
 * Invariant that makes WhatLanded conclusive: a row for an idempotency key is inserted in the
 * same target transaction as the mutation (`outcome = 'applied'`), or by a WhatLanded check
 * that found no receipt (`outcome = 'not_applied'`). The primary key serialises the two: a
 * check waits for an in-flight execution holding the key, and once the check's row exists a
 * late execution with that key can never apply. So "no receipt" is never a guess.
 */
import { sqlCheckList } from '@everdict/contracts';

const RECEIPT_OUTCOMES = ['applied', 'not_applied'] as const;
export type ReceiptOutcome = (typeof RECEIPT_OUTCOMES)[number];

export const DEFAULT_RECEIPTS_TABLE = 'everdict_receipts';
const TABLE_NAME = /^[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?$/;

export interface Statement {
  readonly text: string;
  readonly values: readonly unknown[];
}

export interface ReceiptRow {
  readonly idempotency_key: string;
  readonly operation: string;
  readonly outcome: ReceiptOutcome;
  readonly packet_digest: string;
  readonly call_id: string;
  readonly rows: number | null;
  readonly returned: unknown;
  readonly applied_at: Date | null;
  readonly recorded_at: Date;
}

export function isValidReceiptsTable(name: string): boolean {
  return TABLE_NAME.test(name);
}

/** The table name, quoted per part. Only names that pass `isValidReceiptsTable` reach here. */
function quoteTable(name: string): string {
  if (!isValidReceiptsTable(name)) throw new RangeError('receipts table name is not a plain identifier');
  return name
    .split('.')
    .map((part) => `"${part}"`)
    .join('.');
}

export function createReceiptsTable(table: string): Statement {
  return {
    text: `CREATE TABLE IF NOT EXISTS ${quoteTable(table)} (
             idempotency_key text PRIMARY KEY,
             operation       text NOT NULL,
             outcome         text NOT NULL CHECK (outcome IN (${sqlCheckList(RECEIPT_OUTCOMES)})),
             packet_digest   text NOT NULL,
             call_id         text NOT NULL,
             rows            integer,
             returned        jsonb,
             applied_at      timestamptz,
             recorded_at     timestamptz NOT NULL DEFAULT now()
           )`,
    values: [],
  };
}

/** Per-transaction limits; `set_config(…, true)` is SET LOCAL with bind values. */
export function setTransactionTimeouts(statementTimeoutMs: number, lockTimeoutMs: number): Statement {
  return {
    text: "SELECT set_config('statement_timeout', $1::text, true), set_config('lock_timeout', $2::text, true)",
    values: [`${Math.trunc(statementTimeoutMs)}ms`, `${Math.trunc(lockTimeoutMs)}ms`],
  };
}

/**
 * Claims the key. Blocks while another open transaction holds it; returns no row when the key
 * is already taken (by a committed execution or a fencing check).
 */
export function claimReceipt(table: string, r: { idempotencyKey: string; operation: string; outcome: ReceiptOutcome; packetDigest: string; callId: string }): Statement {
  return {
    text: `INSERT INTO ${quoteTable(table)} (idempotency_key, operation, outcome, packet_digest, call_id)
           VALUES ($1::text, $2::text, $3::text, $4::text, $5::text)
           ON CONFLICT (idempotency_key) DO NOTHING
           RETURNING idempotency_key`,
    values: [r.idempotencyKey, r.operation, r.outcome, r.packetDigest, r.callId],
  };
}

/** Records what the mutation did, in the mutation's transaction. */
export function completeReceipt(table: string, idempotencyKey: string, rows: number, returned: unknown): Statement {
  return {
    text: `UPDATE ${quoteTable(table)} SET rows = $2::integer, returned = $3::jsonb, applied_at = now()
           WHERE idempotency_key = $1::text AND outcome = 'applied'
           RETURNING applied_at`,
    values: [idempotencyKey, rows, JSON.stringify(returned)],
  };
}

export function selectReceipt(table: string, idempotencyKey: string): Statement {
  return {
    text: `SELECT idempotency_key, operation, outcome, packet_digest, call_id, rows, returned, applied_at, recorded_at
           FROM ${quoteTable(table)} WHERE idempotency_key = $1::text`,
    values: [idempotencyKey],
  };
}
