/**
 * The turn-worker as a component: inbox consumer (its handlers claim tasks), activations (turns
 * run after the claim committed), the lease keeper, the sweeper and an outbox relay. Ordered
 * start and stop (pg-boss style): stop consuming first, let running turns reach their commit
 * and release their tasks, then stop the keeper, the sweeper and the relay.
 *
 * Concurrency: at most `maxActiveTasks` deliveries-being-handled plus running activations at
 * once. A delivery waits for a slot BEFORE its unit of work begins (so no transaction waits);
 * a claim keeps its slot for the whole activation and returns it when the task parks, settles
 * or is released. Deliveries beyond that stay unacked with the broker (prefetch), where
 * another worker may take them.
 *
 * Deliveries are consumed in batches (`inboxBatchSize`, see settings.ts): the claims that are
 * ready together share one unit of work, and one claim statement for the tasks their
 * `task.runnable`s name (claimTasksAhead; not where a per-case cap applies). A claim becomes an
 * activation only once the unit of work that made it has committed (`ctx.afterCommit`): a batch
 * that rolls back — and is then processed again delivery by delivery — leaves no claim behind.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { isEverdictError } from '@everdict/contracts';
import { InboxConsumer, startOutboxRelay } from '@everdict/bus';
import type { BusMetrics, MessageHandler, MessageHandlers, OutboxRelay, Transport } from '@everdict/bus';
import { JournalCommitter, claimTasksAhead } from '@everdict/store';
import { captureContext, runInContext } from '@everdict/tracing';
import type { Store } from '@everdict/store';
import type { KernelClock } from '@everdict/agent-runtime';
import type { Logger } from 'pino';
import { runActivation } from './activation.js';
import type { ActivationEnv, Claim } from './activation.js';
import type { Catalog } from './catalog.js';
import type { CrashPoints } from './crashpoints.js';
import { parkWithoutTurn, releaseWithoutTurn } from './commit.js';
import { deadEndOnRefusal } from './deadEnd.js';
import { turnWorkerHandlers } from './handlers.js';
import { claimCaps } from './caps.js';
import { prewriteFirstIntent } from './firstIntent.js';
import { FleetStopHint } from './fleetStop.js';
import { LeaseKeeper } from './leases.js';
import { HeldStates } from './heldStates.js';
import type { TurnMetrics } from './metrics.js';
import { Sweeper } from './sweeper.js';
import type { TurnTiming } from './turn.js';

export const SERVICE = 'turn-worker';

/** A counting semaphore. */
export class Slots {
  private free: number;
  private readonly waiting: (() => void)[] = [];

  constructor(size: number) {
    this.free = size;
  }

  acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

export interface TurnWorkerOptions {
  readonly store: Store;
  readonly transport: Transport;
  readonly catalog: Catalog;
  readonly logger: Logger;
  readonly metrics: TurnMetrics;
  readonly busMetrics?: BusMetrics;
  readonly crash: CrashPoints;
  readonly clock: KernelClock;
  readonly timings: Map<string, TurnTiming>;
  /** Lease owner name (default host:pid:random). */
  readonly owner?: string;
  readonly modelLog?: string | null;
  /** Run an outbox relay in this component (default true; false when the host runs one). */
  readonly relay?: boolean;
}

export class TurnWorker {
  readonly owner: string;
  /** Claims whose unit of work committed, by message id (the gated transport starts them). */
  private readonly claims = new Map<string, Claim>();
  /** Claims made by a handler whose unit of work has not committed yet. */
  private readonly tentative = new Map<string, Claim>();
  private readonly activations = new Set<Promise<void>>();
  private readonly keeper: LeaseKeeper;
  private readonly sweeper: Sweeper;
  private readonly slots: Slots;
  private readonly env: ActivationEnv;
  private consumer: InboxConsumer | undefined;
  private relay: OutboxRelay | undefined;
  private draining = false;

  constructor(private readonly opts: TurnWorkerOptions) {
    this.owner = opts.owner ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
    const settings = () => opts.catalog.settings;
    this.keeper = new LeaseKeeper(opts.store, this.owner, () => settings().leaseTtlMs, opts.logger);
    this.sweeper = new Sweeper(opts.store, () => settings().sweepIntervalMs, opts.metrics, opts.logger);
    this.slots = new Slots(settings().maxActiveTasks);
    const committer = new JournalCommitter(opts.store, { maxBatch: 200, concurrency: 2 });
    opts.metrics.committer(committer);
    this.env = {
      store: opts.store,
      committer,
      catalog: opts.catalog,
      crash: opts.crash,
      metrics: opts.metrics,
      clock: opts.clock,
      timings: opts.timings,
      modelLog: opts.modelLog ?? null,
      logger: opts.logger,
      routeHealth: new Map(),
      fleetStop: new FleetStopHint(opts.store.db),
      draining: () => this.draining,
      held: new HeldStates(() => settings().maxActiveTasks),
    };
  }

  /** Tasks running right now. */
  get active(): number {
    return this.keeper.size;
  }

  async start(): Promise<void> {
    this.keeper.start();
    this.sweeper.start();
    if (this.opts.relay !== false) this.relay = await startOutboxRelay({ store: this.opts.store, transport: this.opts.transport, name: this.owner, logger: this.opts.logger, ...(this.opts.busMetrics ? { metrics: this.opts.busMetrics } : {}) });
    this.consumer = new InboxConsumer({
      store: this.opts.store,
      transport: this.gated(this.opts.transport),
      service: SERVICE,
      handlers: this.claimAfterCommit(
        turnWorkerHandlers({
          owner: this.owner,
          leaseTtlMs: () => this.opts.catalog.settings.leaseTtlMs,
          claims: this.tentative,
          logger: this.opts.logger,
          // A fresh task's first model intent is written with its claim (one commit fewer).
          firstIntent: (uow, claim) => prewriteFirstIntent(this.opts.catalog, uow, claim),
          caps: () => claimCaps(this.opts.catalog),
        }),
      ),
      prefetch: this.opts.catalog.settings.prefetch,
      batchSize: this.opts.catalog.settings.inboxBatchSize,
      // The claims a batch's task.runnables ask for are made in one statement, when no per-case
      // cap governs them; each handler's claimTask then takes its own (tasks.ts).
      beforeBatch: async (fresh, uow) => {
        if (claimCaps(this.opts.catalog).any) return;
        const ids = fresh.flatMap((e) => (e.type === 'task.runnable' ? [e.payload.taskId] : []));
        if (ids.length > 1) await claimTasksAhead(uow, ids, this.owner, this.opts.catalog.settings.leaseTtlMs);
      },
      // An unknown type or version parks the task it is for and tells its parent (deadEnd.ts).
      onRefusal: deadEndOnRefusal(this.opts.store, SERVICE, this.opts.logger),
      logger: this.opts.logger,
      ...(this.opts.busMetrics ? { metrics: this.opts.busMetrics } : {}),
    });
    await this.consumer.start();
    this.opts.logger.info({ owner: this.owner, maxActiveTasks: this.opts.catalog.settings.maxActiveTasks }, 'turn-worker started');
  }

  /** Drain: no new deliveries; running turns finish and release their tasks; then stop. */
  async stop(deadlineMs = 8_000): Promise<void> {
    this.draining = true;
    await this.consumer?.stop();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.activations]), new Promise((r) => (timer = setTimeout(r, deadlineMs)))]);
    clearTimeout(timer);
    await this.keeper.stop();
    await this.sweeper.stop();
    await this.relay?.stop();
  }

  /**
   * The handlers, each handing the claim it made over to `claims` only once its unit of work has
   * committed: a claim made inside a batch that rolled back never starts an activation.
   */
  private claimAfterCommit(handlers: MessageHandlers): MessageHandlers {
    const wrap =
      (h: MessageHandler): MessageHandler =>
      async (e, uow, ctx) => {
        // Nothing before the handler: a duplicate of a delivery in flight runs this far (its
        // first statement then fails), and must not touch the claim the one in flight made.
        const outcome = await h(e, uow, ctx);
        const claim = this.tentative.get(e.id);
        if (claim) {
          this.tentative.delete(e.id);
          // The activation runs later, outside the delivery: it resumes the delivery's trace.
          const trace = captureContext();
          const hand = () => void this.claims.set(e.id, { ...claim, trace });
          if (ctx.afterCommit) ctx.afterCommit(hand);
          else hand();
        }
        return outcome;
      };
    return Object.fromEntries(Object.entries(handlers).map(([type, h]) => [type, wrap(h as MessageHandler)])) as MessageHandlers;
  }

  /** The sweeper, for a one-shot pass (tests, the reconciler). */
  sweepOnce(): Promise<{ expired: number; woken: number }> {
    return this.sweeper.sweepOnce();
  }

  /**
   * The transport as the consumer sees it: a delivery waits for a slot before its unit of work;
   * when that unit of work claimed a task and committed, the activation starts with the slot.
   */
  private gated(inner: Transport): Transport {
    return {
      kind: inner.kind,
      topology: inner.topology,
      identity: inner.identity,
      needsProducer: inner.needsProducer,
      publish: (m) => inner.publish(m),
      isReady: () => inner.isReady(),
      close: () => inner.close(),
      subscribe: (service, processor, subOpts) =>
        inner.subscribe(
          service,
          async (d) => {
            await this.slots.acquire();
            let handedOver = false;
            try {
              const settlement = await processor(d);
              const claim = d.messageId === undefined ? undefined : this.claims.get(d.messageId);
              if (d.messageId !== undefined) this.claims.delete(d.messageId);
              if (claim && settlement === 'ack') {
                this.opts.crash.reach('after_commit', { taskId: claim.task.id, claim: true });
                handedOver = true;
                this.startActivation(claim);
              }
              return settlement;
            } finally {
              if (!handedOver) this.slots.release();
            }
          },
          subOpts,
        ),
    };
  }

  private startActivation(claim: Claim): void {
    const signal = this.keeper.hold(claim.token);
    this.opts.metrics.activation(1);
    const run = runInContext(claim.trace, () => runActivation(this.env, claim, signal))
      .catch((err: unknown) => this.activationFailed(claim, err, signal))
      .finally(() => {
        this.keeper.release(claim.task.id);
        this.slots.release();
        this.opts.metrics.activation(-1);
        this.activations.delete(run);
      });
    this.activations.add(run);
  }

  /**
   * A stale fence is the lease lost (counted by the store; another worker has the task). A
   * transient failure gives the task back. Anything else parks it for an operator: a parked
   * task is never failed for the runtime's own trouble, and it does not spin either.
   */
  private async activationFailed(claim: Claim, err: unknown, signal: AbortSignal): Promise<void> {
    const { task, token } = claim;
    if ((isEverdictError(err) && err.code === 'stale_fence') || signal.aborted) {
      this.opts.logger.info({ caseId: task.case_id, taskId: task.id, epoch: token.epoch }, 'lease lost; a newer holder owns the task');
      return;
    }
    const retryable = isEverdictError(err) && err.retryable;
    this.opts.logger.error({ caseId: task.case_id, taskId: task.id, err: isEverdictError(err) ? { code: err.code, message: err.message } : String(err) }, retryable ? 'turn failed transiently; releasing the task' : 'turn failed; parking the task');
    try {
      if (retryable) await releaseWithoutTurn(this.opts.store, claim);
      else await parkWithoutTurn(this.opts, claim, 'capability_gap', { kind: 'runtime_error', code: isEverdictError(err) ? err.code : 'internal', message: String((err as Error)?.message ?? err).slice(0, 300) });
    } catch (inner) {
      // Most likely the lease is gone too; the sweeper makes the task runnable when it expires.
      this.opts.logger.warn({ caseId: task.case_id, taskId: task.id, err: String(inner) }, 'could not hand the failed task back');
    }
  }
}
