/**
 * Pure WhatLanded classification for the Postgres estate connector. What makes an answer
 * conclusive here is transaction state: a transaction whose COMMIT was never sent cannot
 * commit, and a receipt row is written in the same transaction as the mutation.
 */
import type { LandedReport, Receipt } from '../connector.js';
import type { ReceiptRow } from './receipts.js';

export type Classified = Omit<LandedReport, 'observedAt'>;

/** The SQLSTATE of an error the SERVER reported; undefined for connection-level failures. */
export function sqlState(err: unknown): string | undefined {
  if (err === null || typeof err !== 'object') return undefined;
  const { code, severity } = err as { code?: unknown; severity?: unknown };
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) && typeof severity === 'string' ? code : undefined;
}

const LOCK_NOT_AVAILABLE = '55P03';
const QUERY_CANCELED = '57014';

export function receiptFromRow(row: ReceiptRow): Receipt {
  return {
    idempotencyKey: row.idempotency_key,
    operation: row.operation,
    callId: row.call_id,
    packetDigest: row.packet_digest,
    rows: row.rows,
    returned: (row.returned ?? []) as Receipt[string],
    appliedAt: row.applied_at === null ? null : row.applied_at.toISOString(),
  };
}

/** A key that was already taken when this call tried to claim it (execute) or fence it (check). */
export function classifyPriorReceipt(row: ReceiptRow, packetDigest: string, by: 'execute' | 'whatLanded'): Classified {
  if (row.outcome === 'not_applied') {
    return {
      outcome: 'not_applied',
      reason: 'key_fenced',
      established: 'a WhatLanded check already fenced this idempotency key as not applied; nothing can apply under it (a retry is a new call with a new key)',
    };
  }
  if (row.packet_digest !== packetDigest) {
    return {
      outcome: 'not_applied',
      reason: 'idempotency_key_reused',
      established: 'this idempotency key was applied for a different packet; nothing of this packet ran under it',
    };
  }
  return {
    outcome: 'applied',
    established:
      by === 'execute'
        ? 'an earlier execution with this idempotency key committed; its recorded receipt is returned and nothing ran again'
        : 'the receipt written in the same target transaction as the mutation is present',
    receipt: receiptFromRow(row),
  };
}

/** A failure during execute. `commitSent` is true once COMMIT has been handed to the driver. */
export function classifyExecuteFailure(err: unknown, commitSent: boolean): Classified {
  const state = sqlState(err);
  if (!commitSent) {
    if (state === LOCK_NOT_AVAILABLE) {
      return { outcome: 'unknown', reason: 'key_in_flight', established: 'another execution holding this idempotency key is still open on the target' };
    }
    if (state === QUERY_CANCELED) {
      return { outcome: 'not_applied', reason: 'statement_timeout', established: 'the statement exceeded its timeout; the transaction was never committed' };
    }
    if (state !== undefined) {
      return { outcome: 'not_applied', reason: `sqlstate_${state}`, established: `the target refused the statement (SQLSTATE ${state}); the transaction was never committed` };
    }
    return { outcome: 'not_applied', reason: 'connection_lost_before_commit', established: 'the connection failed before COMMIT was sent; an uncommitted transaction cannot commit' };
  }
  // The server answered COMMIT with an error: deferred constraints or serialization failures
  // abort the transaction. Anything else (connection loss, shutdown) leaves the commit in doubt.
  if (state !== undefined && (state.startsWith('23') || state.startsWith('40'))) {
    return { outcome: 'not_applied', reason: `commit_refused_${state}`, established: `the target refused COMMIT (SQLSTATE ${state}); the transaction rolled back` };
  }
  return {
    outcome: 'unknown',
    reason: 'connection_lost_during_commit',
    established: 'COMMIT was sent but its answer did not arrive; the receipts table will tell whether it landed',
  };
}

/** A failure during a WhatLanded check: never proof of anything. */
export function classifyCheckFailure(err: unknown): Classified {
  const state = sqlState(err);
  if (state === LOCK_NOT_AVAILABLE) {
    return { outcome: 'unknown', reason: 'key_in_flight', established: 'an execution holding this idempotency key is still open on the target; ask again later' };
  }
  return { outcome: 'unknown', reason: 'lookup_failed', established: `the receipts table could not be consulted (${state === undefined ? 'connection failure' : `SQLSTATE ${state}`})` };
}
