/**
 * The reconciler's timer work (DESIGN §2): each sweep is one unit of work that repairs a class of
 * stuck state and enqueues whatever the repair owes someone — in the same commit. Sweeps lock
 * with SKIP LOCKED, so any number of reconcilers (and turn-workers sweeping leases) run at once.
 */
import { PARK_REASONS, WAKE_RUNNABLE } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import {
  DISPATCH_CHANNEL,
  RECONCILE_CHANNEL,
  abandonLapsed,
  claimDueDeadlines,
  countUnknownEffectCalls,
  enqueuePlatformMessage,
  expireGates,
  expireGrants,
  loadGrant,
  markEscalated,
  notifyAtCommit,
  notifyEscalation,
  openGateWaitTimes,
  parkForOperator,
  parkedTaskAges,
  releaseStaleOutboxClaims,
  stampDeadlines,
  sweepLeases,
  wakeDue,
  wakeOrphanedImpactWaiters,
} from '@everdict/store';
import type { DeadlineSubject, Store } from '@everdict/store';
import { decideEscalation, deadlineRules, ruleFor } from './escalation.js';
import type { ReconcilerMetrics } from './metrics.js';

export const RECONCILER_SERVICE = 'reconciler';

/**
 * Executions whose coordinator stopped renewing its claim: their calls become unknown and go to
 * WhatLanded (never to a second execute); the proposing task is told the outcome is in doubt.
 */
export async function abandonLapsedExecutions(store: Store, limit = 50): Promise<number> {
  return store.unitOfWork(async (uow) => {
    const rows = await abandonLapsed(uow, limit);
    for (const r of rows) {
      const grant = await loadGrant(uow, r.grant_id);
      await uow.appendLedger(r.case_id, { kind: 'effect_abandoned', body: { grantId: r.grant_id, callId: r.call_id, attempt: r.attempt } });
      await enqueuePlatformMessage(uow, RECONCILER_SERVICE, 'effect.outcome', r.case_id, {
        taskId: r.task_id,
        callId: r.call_id!,
        grantId: r.grant_id,
        packetDigest: grant?.packet_digest ?? '',
        outcome: 'unknown',
        established: 'the coordinator stopped after persisting the intent; whether the target was contacted is being reconciled',
      });
    }
    if (rows.length > 0) await notifyAtCommit(uow, RECONCILE_CHANNEL);
    return rows.length;
  });
}

/** Open gates past their expiry close as expired (the agent is told); issued grants past theirs expire. */
export async function expireAuthority(store: Store, limit = 100): Promise<{ gates: number; grants: number }> {
  return store.unitOfWork(async (uow) => {
    const gates = await expireGates(uow, limit);
    for (const g of gates) {
      await uow.appendLedger(g.case_id, { kind: 'gate_expired', body: { gateId: g.id, packetDigest: g.packet_digest } });
      await enqueuePlatformMessage(uow, RECONCILER_SERVICE, 'gate.decided', g.case_id, {
        gateId: g.id,
        taskId: g.task_id,
        packetDigest: g.packet_digest,
        outcome: 'expired',
        reason: 'the gate expired before every decision was given',
      });
    }
    const grants = await expireGrants(uow, limit);
    for (const g of grants) await uow.appendLedger(g.case_id, { kind: 'grant_expired', body: { grantId: g.id, gateId: g.gate_id, packetDigest: g.packet_digest } });
    return { gates: gates.length, grants: grants.length };
  });
}

/**
 * Open gates and unanswered questions past their deadline escalate as their case type declares
 * (issue 13 item 6), each once, ledgered `escalated` in the unit of work that marks it. Deadlines
 * not yet fixed are fixed first (created_at + afterMs). A gate's own expiry is expireAuthority's.
 */
export async function escalateDeadlines(store: Store, fleet: FleetConfig, limit = 50): Promise<number> {
  let n = 0;
  for (const subject of ['gate', 'question'] as const satisfies readonly DeadlineSubject[]) {
    await stampDeadlines(store.db, subject, deadlineRules(fleet, subject));
    n += await store.unitOfWork(async (uow) => {
      const due = await claimDueDeadlines(uow, subject, limit);
      for (const d of due) {
        const esc = decideEscalation(subject, ruleFor(fleet, d.case_type, subject), d.escalations);
        const deadlineAt = await markEscalated(uow, subject, d.id, esc.action === 'reask' ? esc.extendMs : null);
        const parked = esc.action === 'park_for_operator' ? await parkForOperator(uow, d.task_id, esc.reason) : undefined;
        await uow.appendLedger(d.case_id, {
          kind: 'escalated',
          body: {
            subject,
            [subject === 'gate' ? 'gateId' : 'questionId']: d.id,
            taskId: d.task_id,
            action: esc.action,
            deadlineAt: d.deadline_at.toISOString(),
            ...(esc.action === 'notify_role' ? { role: esc.role } : {}),
            ...(esc.action === 'reask' ? { newDeadlineAt: deadlineAt.toISOString(), renotify: d.roles } : {}),
            ...(esc.action === 'park_for_operator' ? { reason: esc.reason, taskParked: parked } : {}),
          },
        });
        await notifyEscalation(uow, d.case_id);
      }
      return due.length;
    });
  }
  return n;
}

/** Running tasks whose lease lapsed (database clock) become runnable again, with a nudge. */
export async function releaseExpiredLeases(store: Store, metrics: ReconcilerMetrics, limit = 100): Promise<number> {
  const rows = await sweepLeases(store, {
    limit,
    onExpired: async (uow, task) => {
      await enqueuePlatformMessage(uow, RECONCILER_SERVICE, 'task.runnable', task.case_id, { taskId: task.id, reason: 'retry' });
    },
  });
  metrics.leaseExpiries(rows.length);
  return rows.length;
}

/** Parks whose wake a sweep owns (PARK_CLASSES: health-gated backoff, a child's question) wake up. */
export async function wakeParkedTimers(store: Store, limit = 100): Promise<number> {
  const rows = await wakeDue(store, {
    limit,
    onWoken: async (uow, task, cause) => {
      await enqueuePlatformMessage(uow, RECONCILER_SERVICE, 'task.runnable', task.case_id, { taskId: task.id, reason: WAKE_RUNNABLE[cause] });
    },
  });
  return rows.length;
}

/** Coordination waiters whose impact key is free again (a release that raced their parking). */
export async function wakeFreedWaiters(store: Store): Promise<number> {
  const n = await wakeOrphanedImpactWaiters(store.db, 100);
  if (n > 0) await store.db.query({ text: 'SELECT pg_notify($1::text, $2::text)', values: [DISPATCH_CHANNEL, ''] });
  return n;
}

/** Outbox rows whose relay claim lapsed long ago without a publish go back to every relay. */
export async function releaseStaleOutbox(store: Store, graceMs: number): Promise<number> {
  return releaseStaleOutboxClaims(store.db, graceMs, 500);
}

export async function reportGauges(store: Store, metrics: ReconcilerMetrics): Promise<void> {
  metrics.unknownOutcomes(await countUnknownEffectCalls(store.db));
  const ages = await parkedTaskAges(store.db);
  metrics.parkedOldest(ages.filter((a) => (PARK_REASONS as readonly string[]).includes(a.park_reason)));
  metrics.openGates(await openGateWaitTimes(store.db));
}
