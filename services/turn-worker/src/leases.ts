/**
 * The lease keeper: every task this process runs holds a lease on the DATABASE clock, renewed
 * for all of them in one statement every third of the lease. A task whose renewal finds the
 * lease gone (swept after a stall, claimed by another worker) is aborted at once: its next
 * fenced write would be refused anyway, and it must not even start one.
 */
import { renewLeases } from '@everdict/store';
import type { FenceToken, Store } from '@everdict/store';
import type { Logger } from 'pino';

export class LeaseKeeper {
  private readonly held = new Map<string, { token: FenceToken; abort: AbortController }>();
  private timer: NodeJS.Timeout | undefined;
  private renewing: Promise<void> | undefined;

  constructor(
    private readonly store: Store,
    private readonly owner: string,
    private readonly ttlMs: () => number,
    private readonly logger: Logger,
  ) {}

  /** Tracks a freshly claimed lease; the signal aborts when the lease is lost. */
  hold(token: FenceToken): AbortSignal {
    const abort = new AbortController();
    this.held.set(token.taskId, { token, abort });
    return abort.signal;
  }

  release(taskId: string): void {
    this.held.delete(taskId);
  }

  get size(): number {
    return this.held.size;
  }

  start(): void {
    const every = Math.max(50, Math.floor(this.ttlMs() / 3));
    this.timer = setInterval(() => {
      this.renewing ??= this.renewAll().finally(() => (this.renewing = undefined));
    }, every);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.renewing;
  }

  /** One statement for every held lease; the ones not renewed are aborted. */
  async renewAll(): Promise<void> {
    const leases = [...this.held.values()].map((h) => ({ taskId: h.token.taskId, epoch: h.token.epoch }));
    if (leases.length === 0) return;
    let renewed: Map<string, Date>;
    try {
      renewed = await renewLeases(this.store, this.owner, leases, this.ttlMs());
    } catch (err) {
      // The database is unreachable: the leases run out on its clock and the tasks are swept.
      this.logger.warn({ err: String(err), leases: leases.length }, 'lease renewal failed');
      return;
    }
    for (const l of leases) {
      if (renewed.has(l.taskId)) continue;
      const h = this.held.get(l.taskId);
      if (h && h.token.epoch === l.epoch) {
        this.logger.warn({ taskId: l.taskId, epoch: l.epoch }, 'lease lost; stopping the task');
        h.abort.abort(new Error('lease lost'));
      }
    }
  }
}
