/**
 * Pure classification of HTTP exchanges into WhatLanded (§7). The rule behind every line: only
 * an answer from the target, or proof the request never left, is conclusive.
 */
import type { JsonValue, LandedReport, Receipt } from '../connector.js';
import type { HttpAttempt } from './transport.js';

export type Classified = Omit<LandedReport, 'observedAt'>;

/** The body as JSON when it parses, else as text. */
export function parseBody(body: string): JsonValue {
  if (body === '') return null;
  try {
    return JSON.parse(body) as JsonValue;
  } catch {
    return body;
  }
}

function receiptOf(status: number, body: string, idempotencyKey: string): Receipt {
  return { httpStatus: status, idempotencyKey, body: parseBody(body) };
}

/** The answer to a mutation request. */
export function classifyMutation(attempt: HttpAttempt, idempotencyKey: string): Classified {
  switch (attempt.kind) {
    case 'not_sent':
      return { outcome: 'not_applied', reason: 'not_sent', established: `no connection was established (${attempt.cause}), so the request was never sent` };
    case 'lost':
      return { outcome: 'unknown', reason: 'connection_lost', established: `the request may have reached the target but no answer arrived (${attempt.cause}); reconcile through the receipt lookup` };
    case 'response':
      break;
  }
  const { status } = attempt;
  if (status >= 200 && status < 300) {
    return { outcome: 'applied', established: `the target answered HTTP ${status} to the request carrying the idempotency key`, receipt: receiptOf(status, attempt.body, idempotencyKey) };
  }
  // 409 under an Idempotency-Key means "a request with this key is still being processed"
  // (IETF httpapi-idempotency-key-header): the earlier attempt may yet apply.
  if (status === 409) {
    return { outcome: 'unknown', reason: 'http_409', established: 'the target reports a request with this idempotency key still in progress' };
  }
  if (status >= 400 && status < 500) {
    return { outcome: 'not_applied', reason: `http_${status}`, established: `the target refused the request with HTTP ${status}`, receipt: receiptOf(status, attempt.body, idempotencyKey) };
  }
  if (status >= 500 && status < 600) {
    return { outcome: 'unknown', reason: `http_${status}`, established: `the target failed with HTTP ${status}; it may have applied part or all of the request` };
  }
  return { outcome: 'unknown', reason: 'unexpected_status', established: `the target answered HTTP ${status}, which says nothing about the effect` };
}

/** The answer of the receipt/status lookup for one idempotency key. */
export function classifyReceiptLookup(attempt: HttpAttempt, idempotencyKey: string, conclusive: boolean): Classified {
  if (attempt.kind !== 'response') {
    return { outcome: 'unknown', reason: 'lookup_failed', established: `the receipt lookup got no answer (${attempt.cause})` };
  }
  const { status } = attempt;
  if (status >= 200 && status < 300 && attempt.complete) {
    return { outcome: 'applied', established: `the target holds a receipt for the idempotency key (HTTP ${status})`, receipt: receiptOf(status, attempt.body, idempotencyKey) };
  }
  if (status === 404) {
    return conclusive
      ? { outcome: 'not_applied', reason: 'no_receipt', established: 'the target has no receipt for the idempotency key and declares its receipts conclusive' }
      : { outcome: 'unknown', reason: 'no_receipt', established: 'the target has no receipt for the idempotency key, but does not declare receipts conclusive: absence is not proof' };
  }
  return { outcome: 'unknown', reason: `lookup_http_${status}`, established: `the receipt lookup answered HTTP ${status}` };
}
