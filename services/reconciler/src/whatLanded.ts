/**
 * Reconciling one unknown outcome (seed 004 §7): ask the connector what landed for exactly the
 * attempt in doubt (its idempotency key), record the answer as ledger evidence, and act on it:
 *
 *   unknown           → stays parked; asked again after a backoff; never retried blind
 *   applied / partly  → the outcome is recorded; the coordinator settles it (post-check, keys,
 *                       grant, effect.outcome)
 *   not_applied       → recorded. From a connector that can prove absence, and below the attempt
 *                       limit, the same grant and call get a NEW attempt (new idempotency key:
 *                       the old one is burnt at the target); otherwise it settles as not applied.
 *
 * A connector without a conclusive receipt may prove `applied` by its declared post-state read
 * (libs/connectors postState.ts). Where nothing can, the call stays unknown until an operator
 * records the outcome (libs/store operatorOutcome.ts); an attempt the operator marked partly
 * applied is left to the operator and not asked about again.
 *
 * Reconciliation runs under hard stop too: it contacts the target only to read what landed.
 */
import type { Clock } from '@everdict/contracts';
import { jitteredBackoffMs } from '@everdict/contracts';
import { ConnectorRefused, mayRetryAutomatically } from '@everdict/connectors';
import type { ConnectorSet, LandedReport } from '@everdict/connectors';
import {
  DISPATCH_CHANNEL,
  effectIdempotencyKey,
  heldForOperator,
  loadEffectCall,
  loadGate,
  loadGrant,
  moveDispatchTo,
  notifyAtCommit,
  readPacketPaper,
  recordEffectOutcome,
} from '@everdict/store';
import type { DispatchRow, LandedRecord, Store } from '@everdict/store';

export interface Backoff {
  readonly initialMs: number;
  readonly maxMs: number;
}

/** Delay before the next WhatLanded check after `checks` inconclusive ones. Pure. */
export function recheckDelay(checks: number, b: Backoff): number {
  return Math.min(b.initialMs * 2 ** Math.min(checks, 30), b.maxMs);
}

export type Reconciled = 'unknown' | 'settling' | 'retry' | 'skipped';

interface ReconcileDeps {
  readonly store: Store;
  readonly connectors: ConnectorSet;
  readonly owner: string;
  readonly clock: Clock;
  readonly backoff: Backoff;
  /** Attempts of one call before a proven "not applied" settles instead of retrying (default 3). */
  readonly maxAttempts: number;
}

export async function reconcileDispatch(d: ReconcileDeps, row: DispatchRow): Promise<Reconciled> {
  const { store } = d;
  const call = row.call_id ? await loadEffectCall(store.db, row.call_id) : undefined;
  const grant = await loadGrant(store.db, row.grant_id);
  const gate = grant?.gate_id ? await loadGate(store.db, grant.gate_id) : undefined;
  if (!call || !call.logical_key || !call.effect_attempt || !gate?.packet_paper_id || gate.packet_revision === null) return 'skipped';
  if (call.status !== 'intent' && call.status !== 'unknown') {
    // Recorded meanwhile (a slow coordinator's late answer): hand it to settlement.
    await moveDispatchTo(store.db, { grantId: row.grant_id, from: ['reconciling'], to: 'settling', owner: d.owner });
    return 'settling';
  }
  if (await heldForOperator(store.db, call.id, call.effect_attempt)) {
    // An operator recorded this attempt as partly applied: a human owns it now. The target is not
    // asked again; the row is only looked at after the longest backoff, keys still held.
    await moveDispatchTo(store.db, { grantId: row.grant_id, from: ['reconciling'], to: 'reconciling', owner: d.owner, delayMs: d.backoff.maxMs });
    return 'unknown';
  }
  const packet = (await readPacketPaper(store.db, gate.packet_paper_id, gate.packet_revision)).packet;
  const connector = d.connectors.get(packet.operation.connector);
  const attempt = call.effect_attempt;

  let report: LandedReport;
  if (!connector) {
    report = { outcome: 'unknown', reason: 'connector_unknown', established: `no connector ${packet.operation.connector} is configured in this reconciler`, observedAt: d.clock.now().toISOString() };
  } else {
    try {
      report = await connector.whatLanded(packet, { callId: call.id, idempotencyKey: effectIdempotencyKey(call.logical_key, attempt) }, { clock: d.clock });
    } catch (err) {
      if (!(err instanceof ConnectorRefused)) throw err;
      report = { outcome: 'unknown', reason: `lookup_refused_${err.reason}`, established: `the connector refused the lookup before contact: ${err.message}`, observedAt: d.clock.now().toISOString() };
    }
  }
  const landed: LandedRecord = { callId: call.id, attempt, source: 'what_landed', ...report };
  const retry = report.outcome === 'not_applied' && connector !== undefined && mayRetryAutomatically(connector.describe(), 'not_applied') && attempt < d.maxAttempts;

  return store.unitOfWork(async (uow): Promise<Reconciled> => {
    await uow.appendLedger(row.case_id, {
      kind: 'effect_whatlanded',
      body: { grantId: row.grant_id, callId: call.id, attempt, outcome: report.outcome, established: report.established, reason: report.reason ?? null, receipt: report.receipt ?? null, observedAt: report.observedAt },
    });
    if (report.outcome === 'unknown') {
      await moveDispatchTo(uow, { grantId: row.grant_id, from: ['reconciling'], to: 'reconciling', owner: d.owner, checks: 'increment', delayMs: jitteredBackoffMs(recheckDelay(row.checks, d.backoff)) });
      return 'unknown';
    }
    if (!(await recordEffectOutcome(uow, row.case_id, landed))) return 'skipped';
    if (retry) {
      await moveDispatchTo(uow, { grantId: row.grant_id, from: ['reconciling'], to: 'pending', owner: d.owner, checks: 'reset', detail: { retryAfterAttempt: attempt } });
      await uow.appendLedger(row.case_id, { kind: 'effect_retry', body: { grantId: row.grant_id, callId: call.id, provenNotApplied: attempt, nextAttempt: attempt + 1 } });
    } else {
      await moveDispatchTo(uow, { grantId: row.grant_id, from: ['reconciling'], to: 'settling' });
    }
    await notifyAtCommit(uow, DISPATCH_CHANNEL);
    return retry ? 'retry' : 'settling';
  });
}
