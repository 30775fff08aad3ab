/**
 * Retention in the reconciler (issue 15 item 3, seed D49): the fleet config's `retention`
 * section resolved to a policy (pure, with the documented defaults), and a runner that starts a
 * pass when one is due, in the background, so the reconciler's other sweeps never wait for it.
 *
 * Invariants:
 * - At most one pass at a time per reconciler; N reconcilers may prune together (the batches
 *   skip rows another holds, see libs/store sql/retention.ts).
 * - The policy is read at the start of each pass, so a SIGHUP reload applies to the next one.
 * - A failed pass is logged and retried at the next interval; it never stops the loop.
 */
import type { FleetConfig } from '@everdict/contracts';
import { retentionPass } from '@everdict/store';
import type { Db, RetentionKind, RetentionPolicy } from '@everdict/store';

/** The broker's redelivery horizon (1 day) plus 7 days. */
export const DEFAULT_INBOX_DAYS = 8;
export const DEFAULT_OUTBOX_DAYS = 7;
export const DEFAULT_BATCH_ROWS = 1_000;
export const DEFAULT_BATCH_PAUSE_MS = 200;
export const DEFAULT_INTERVAL_MINUTES = 60;

/** The policy `retention` declares (absent fields take the defaults; papers are kept unless set). */
export function retentionPolicy(section: FleetConfig['retention']): RetentionPolicy & { readonly intervalMs: number } {
  const r = section ?? {};
  return {
    days: { inbox: r.inboxDays ?? DEFAULT_INBOX_DAYS, outbox: r.outboxDays ?? DEFAULT_OUTBOX_DAYS, papers: r.closedCasePapersDays ?? null },
    batchRows: r.batchRows ?? DEFAULT_BATCH_ROWS,
    pauseMs: r.batchPauseMs ?? DEFAULT_BATCH_PAUSE_MS,
    intervalMs: Math.round((r.intervalMinutes ?? DEFAULT_INTERVAL_MINUTES) * 60_000),
  };
}

interface RetentionLogger {
  info(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export class RetentionRunner {
  private running: Promise<void> | undefined;
  private lastStart = -Infinity;
  private readonly abort = new AbortController();

  constructor(
    private readonly db: Db,
    private readonly fleet: () => FleetConfig | undefined,
    private readonly pruned: (kind: RetentionKind, rows: number) => void,
    private readonly logger: RetentionLogger,
  ) {}

  /** Starts a pass if none runs and the interval since the last start has passed. */
  maybeStart(now = Date.now()): void {
    if (this.running || this.abort.signal.aborted) return;
    const policy = retentionPolicy(this.fleet()?.retention);
    if (now - this.lastStart < policy.intervalMs) return;
    this.lastStart = now;
    this.running = retentionPass(this.db, policy, { signal: this.abort.signal, onPruned: this.pruned })
      .then((counts) => {
        if (counts.inbox + counts.outbox + counts.papers > 0) this.logger.info({ ...counts }, 'retention pass pruned rows');
      })
      .catch((err: unknown) => this.logger.error({ err: err instanceof Error ? err.message : String(err) }, 'retention pass failed; retried at the next interval'))
      .finally(() => (this.running = undefined));
  }

  /** Stops between batches and waits for the pass in flight. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.running;
  }
}
