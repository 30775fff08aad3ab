/**
 * The sweeper every turn-worker runs (the reconciler reuses the same store statements): tasks
 * whose lease expired on the database clock — their worker died or stalled — become runnable
 * again, and parks whose wake the sweep owns (health-gated backoff, a parent's waiting child
 * question — contracts' PARK_CLASSES) wake. Each sweep is one unit of work with the
 * task.runnable outbox rows it needs.
 */
import { WAKE_RUNNABLE } from '@everdict/contracts';
import { sweepLeases, wakeDue } from '@everdict/store';
import type { Store } from '@everdict/store';
import type { Logger } from 'pino';
import { sendRunnable } from './envelopes.js';
import type { TurnMetrics } from './metrics.js';

export class Sweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  constructor(
    private readonly store: Store,
    private readonly intervalMs: () => number,
    private readonly metrics: TurnMetrics,
    private readonly logger: Logger,
    private readonly limit = 200,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.sweepOnce()
        .then(() => undefined)
        .catch((err: unknown) => this.logger.warn({ err: String(err) }, 'sweep failed'))
        .finally(() => (this.running = undefined));
    }, this.intervalMs());
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One pass; returns how many tasks it made runnable. */
  async sweepOnce(): Promise<{ expired: number; woken: number }> {
    const expired = await sweepLeases(this.store, { limit: this.limit, onExpired: async (uow, t) => void (await sendRunnable(uow, t, 'retry', null)) });
    const woken = await wakeDue(this.store, { limit: this.limit, onWoken: async (uow, t, cause) => void (await sendRunnable(uow, t, WAKE_RUNNABLE[cause], null)) });
    if (expired.length > 0) {
      this.metrics.swept('expired_lease', expired.length);
      this.logger.info({ tasks: expired.length }, 'expired leases swept; tasks runnable again');
    }
    if (woken.length > 0) this.metrics.swept('woken', woken.length);
    return { expired: expired.length, woken: woken.length };
  }
}
