/**
 * The reconciler's loop: every `intervalMs` (or sooner, when woken by a NOTIFY or an unknown
 * `effect.outcome`) it runs each sweep once and reconciles the unknown outcomes that are due.
 * A failing sweep is logged and retried on the next tick; it never stops the others.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { isEverdictError } from '@everdict/contracts';
import type { Clock, FleetConfig } from '@everdict/contracts';
import type { ConnectorSet } from '@everdict/connectors';
import { RECONCILE_CHANNEL, claimDueDispatches, renewDispatches } from '@everdict/store';
import type { Store } from '@everdict/store';
import type { ReconcilerMetrics } from './metrics.js';
import {
  abandonLapsedExecutions,
  escalateDeadlines,
  expireAuthority,
  releaseExpiredLeases,
  releaseStaleOutbox,
  reportGauges,
  wakeFreedWaiters,
  wakeParkedTimers,
} from './sweeps.js';
import type { Backoff, Reconciled } from './whatLanded.js';
import { reconcileDispatch } from './whatLanded.js';
import { RetentionRunner } from './retention.js';
import { SPAN, withSpan } from '@everdict/tracing';

interface ReconcilerLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

interface ReconcilerLoopOptions {
  readonly store: Store;
  readonly connectors: ConnectorSet;
  readonly metrics: ReconcilerMetrics;
  readonly logger: ReconcilerLogger;
  readonly clock: Clock;
  /** The fleet config: case types' escalation rules (absent: no deadline escalates). */
  readonly fleet?: FleetConfig;
  /** Tick period in ms (default 1000). */
  readonly intervalMs?: number;
  /** Backoff of repeated inconclusive WhatLanded checks (default 1 s doubling to 5 min). */
  readonly backoff?: Backoff;
  /** Attempts of one effect call before a proven "not applied" settles (default 3). */
  readonly maxAttempts?: number;
  /** Claim lease on a reconciliation, in ms (default 30000). */
  readonly leaseMs?: number;
  /** Unknown outcomes reconciled at once (default 8). */
  readonly concurrency?: number;
  /** How long after its claim lapsed an unpublished outbox row is released, in ms (default 60000). */
  readonly outboxGraceMs?: number;
  readonly owner?: string;
}

export class ReconcilerLoop {
  private readonly owner: string;
  private running = false;
  private done: Promise<void> | undefined;
  private waiter: (() => void) | undefined;
  private woken = false;
  private unlisten: (() => Promise<void>) | undefined;
  /** The fleet config in force: the one started with, then each SIGHUP reload's. */
  private fleet: FleetConfig | undefined;
  private readonly retention: RetentionRunner;

  constructor(private readonly o: ReconcilerLoopOptions) {
    this.owner = o.owner ?? `reconciler:${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
    this.fleet = o.fleet;
    this.retention = new RetentionRunner(o.store.db, () => this.fleet, (kind, rows) => o.metrics.retentionPruned(kind, rows), o.logger);
  }

  /** A reloaded fleet config: escalation rules and retention follow it from the next tick. */
  replaceFleet(next: FleetConfig): void {
    this.fleet = next;
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.unlisten = await this.o.store.db.listen(RECONCILE_CHANNEL, () => this.wake());
    this.done = this.loop();
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.wake();
    await this.done;
    await this.retention.stop();
    await this.unlisten?.().catch(() => undefined);
  }

  wake(): void {
    this.woken = true;
    this.waiter?.();
  }

  /** One pass of every sweep (exported for tests and operators). */
  async tick(): Promise<void> {
    await this.step('abandon lapsed executions', () => abandonLapsedExecutions(this.o.store));
    await this.step('reconcile unknown outcomes', () => this.reconcileDue());
    await this.step('expire gates and grants', () => expireAuthority(this.o.store));
    const fleet = this.fleet;
    if (fleet) await this.step('escalate deadlines', () => escalateDeadlines(this.o.store, fleet));
    await this.step('release expired leases', () => releaseExpiredLeases(this.o.store, this.o.metrics));
    await this.step('wake parked timers', () => wakeParkedTimers(this.o.store));
    await this.step('wake coordination waiters', () => wakeFreedWaiters(this.o.store));
    await this.step('release stale outbox claims', () => releaseStaleOutbox(this.o.store, this.o.outboxGraceMs ?? 60_000));
    await this.step('report gauges', () => reportGauges(this.o.store, this.o.metrics));
    // In the background: a pass's batches and pauses never hold up the sweeps above.
    await this.step('start retention', async () => this.retention.maybeStart());
  }

  private async loop(): Promise<void> {
    while (this.running) {
      this.woken = false;
      await this.tick();
      if (!this.running) break;
      if (this.woken) continue;
      await new Promise<void>((resolve) => {
        const finish = () => {
          clearTimeout(timer);
          this.waiter = undefined;
          resolve();
        };
        const timer = setTimeout(finish, this.o.intervalMs ?? 1_000);
        this.waiter = finish;
      });
    }
  }

  private async reconcileDue(): Promise<Record<Reconciled, number>> {
    const counts: Record<Reconciled, number> = { unknown: 0, settling: 0, retry: 0, skipped: 0 };
    const leaseMs = this.o.leaseMs ?? 30_000;
    const rows = await claimDueDispatches(this.o.store.db, this.owner, ['reconciling'], this.o.concurrency ?? 8, leaseMs);
    if (rows.length === 0) return counts;
    const renew = setInterval(() => void renewDispatches(this.o.store.db, this.owner, rows.map((r) => r.grant_id), leaseMs).catch(() => undefined), Math.max(50, leaseMs / 3));
    try {
      const deps = {
        store: this.o.store,
        connectors: this.o.connectors,
        owner: this.owner,
        clock: this.o.clock,
        backoff: this.o.backoff ?? { initialMs: 1_000, maxMs: 300_000 },
        maxAttempts: this.o.maxAttempts ?? 3,
      };
      // Each reconciliation continues the trace its dispatch row kept (the approval's).
      const reconcile = (r: (typeof rows)[number]) => withSpan(SPAN.effectReconcile, { parent: r.traceparent, attributes: { 'grant.id': r.grant_id, 'case.id': r.case_id, 'task.id': r.task_id, 'call.id': r.call_id } }, () => reconcileDispatch(deps, r));
      const results = await Promise.allSettled(rows.map(reconcile));
      results.forEach((r, i) => {
        if (r.status === 'fulfilled') counts[r.value]++;
        else this.o.logger.error({ grantId: rows[i]!.grant_id, caseId: rows[i]!.case_id, taskId: rows[i]!.task_id, err: describe(r.reason) }, 'reconciliation failed; retried after the claim lapses');
      });
    } finally {
      clearInterval(renew);
    }
    if (counts.settling + counts.retry > 0) this.o.logger.info({ ...counts }, 'unknown outcomes reconciled');
    return counts;
  }

  private async step(name: string, fn: () => Promise<unknown>): Promise<void> {
    try {
      await fn();
    } catch (err) {
      this.o.logger.error({ sweep: name, err: describe(err) }, 'sweep failed; retried next tick');
    }
  }
}

function describe(err: unknown): { code: string; message: string } {
  if (isEverdictError(err)) return { code: err.code, message: err.message };
  return { code: 'internal', message: err instanceof Error ? err.message : String(err) };
}
