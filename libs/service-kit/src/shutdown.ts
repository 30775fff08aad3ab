/**
 * Shutdown hooks: a stack. Resources are registered in the order they are opened (pools, then
 * publishers, then consumers) and closed in reverse: stop consuming first, then let in-flight
 * units of work finish and drain publisher confirms, then close pools (DESIGN §2).
 *
 * Invariants:
 * - Hooks run one at a time, in reverse registration order, each at most once.
 * - A failing hook is logged and the drain goes on: later resources still need closing. The
 *   failure is reported so the process can exit non-zero.
 * - A hook registered after the drain began (a `start` still opening things) runs right away,
 *   so nothing opened late stays open.
 */
import type { Logger } from 'pino';

export type ShutdownHook = () => Promise<void> | void;

interface DrainReport {
  /** Hook names that threw, in run order. */
  readonly failed: readonly string[];
}

export class ShutdownHooks {
  private readonly stack: { name: string; fn: ShutdownHook }[] = [];
  private draining = false;
  private current: string | undefined;
  private readonly late: Promise<string | undefined>[] = [];

  constructor(private readonly logger: Logger) {}

  add(name: string, fn: ShutdownHook): void {
    if (this.draining) {
      this.logger.warn({ hook: name }, 'shutdown hook registered during drain; running it now');
      this.late.push(this.runOne(name, fn).then((ok) => (ok ? undefined : name)));
      return;
    }
    this.stack.push({ name, fn });
  }

  /** Names in the order they will run. */
  get order(): readonly string[] {
    return this.stack.map((h) => h.name).reverse();
  }

  /** The hook running now, if any (named in the deadline-exceeded log line). */
  get running(): string | undefined {
    return this.current;
  }

  async drain(): Promise<DrainReport> {
    this.draining = true;
    const failed: string[] = [];
    while (this.stack.length > 0) {
      const hook = this.stack.pop() as { name: string; fn: ShutdownHook };
      if (!(await this.runOne(hook.name, hook.fn))) failed.push(hook.name);
    }
    for (const name of await Promise.all(this.late)) if (name !== undefined) failed.push(name);
    return { failed };
  }

  private async runOne(name: string, fn: ShutdownHook): Promise<boolean> {
    const started = performance.now();
    this.current = name;
    try {
      await fn();
      this.logger.info({ hook: name, ms: Math.round(performance.now() - started) }, 'shutdown hook done');
      return true;
    } catch (err) {
      this.logger.error({ hook: name, err, ms: Math.round(performance.now() - started) }, 'shutdown hook failed');
      return false;
    } finally {
      if (this.current === name) this.current = undefined;
    }
  }
}
