/**
 * The outbox relay (DESIGN §3): publishes committed OUTBOX_MESSAGES rows and marks them
 * published only after the transport confirmed them.
 *
 * Loop: claim a batch (a short lease, so several relays never publish the same row at once) →
 * publish every row of the batch at once, many confirms in flight → mark the confirmed rows
 * published → release the failed ones for an immediate retry. Woken after each commit that
 * enqueued: in-process for this process's writes, by LISTEN/NOTIFY for a process without a relay
 * (Store.listenOutbox, outboxWake.ts), with a poll timer as the fallback for a lost wake-up.
 *
 * Two claims: a wake-up names the rows its commit wrote (in-process, or in another process's
 * NOTIFY payload), and those are claimed by key (a few index probes); everything else — the
 * first claim, a wake-up naming no rows (a NOTIFY without ids, a reconnected listener), the poll
 * at least every pollMs whether or not hinted claims run, the retry after a failed batch —
 * claims the oldest claimable rows whoever wrote them. A row a hinted claim does not take
 * (another relay holds it, a publish failed) is taken by a full claim: a hint only makes a row
 * sooner, never the only way. A pipeline woken after another took the hints claims nothing: a
 * full claim there would scan the unpublished rows for the ones the hinted claims take by key.
 *
 * Invariants:
 * - A row is marked published only after its confirm: a crash or a lost connection at any point
 *   leaves it unpublished (or claimed until the lease ends) and it is published again. At least
 *   once; the receivers' inbox makes it effectively once.
 * - Nothing here opens a transaction; claim, mark and release are single statements.
 * - A row's traceparent (its own column) is published as the `traceparent` header under an
 *   `outbox.publish` span; the body's bytes are never touched.
 */
import { jitteredBackoffMs } from '@everdict/contracts';
import type { Store } from '@everdict/store';
import { SPAN, SpanKind, currentTraceparent, withSpan } from '@everdict/tracing';
import type { BusLogger } from './logger.js';
import { describeError, noopBusLogger } from './logger.js';
import type { BusMetrics } from './metrics.js';
import { noopBusMetrics } from './metrics.js';
import type { Transport } from './transport.js';

interface OutboxRelayOptions {
  readonly store: Store;
  readonly transport: Transport;
  /** Claim owner name, visible in outbox_messages.claimed_by (default "relay"). */
  readonly name?: string;
  /** Rows claimed and published per batch (default 500). */
  readonly batchSize?: number;
  /** Claim lease in ms: after it a row is claimable again (default 30000). */
  readonly leaseMs?: number;
  /** Poll interval in ms when no notification arrives (default 1000). */
  readonly pollMs?: number;
  /** Batches in flight at once (default 2): the next claim overlaps the previous confirms. */
  readonly pipelines?: number;
  /** Most time `stop()` waits for in-flight confirms, in ms (default 10000). */
  readonly drainTimeoutMs?: number;
  /**
   * The services this relay publishes as (a node holding broker credentials for only these):
   * it claims only the rows they enqueued. Unset: every row (shared or in-process identity).
   */
  readonly producers?: readonly string[];
  readonly metrics?: BusMetrics;
  readonly logger?: BusLogger;
}

type ClaimedRow = Awaited<ReturnType<Store['claimOutbox']>>[number];

/** Hinted ids kept at most; beyond them the relay falls back to full claims (bounded memory while it is behind). */
const MAX_HINTS = 50_000;

interface RelayBatchResult {
  readonly claimed: number;
  readonly published: number;
  readonly failed: number;
}

export class OutboxRelay {
  private readonly name: string;
  private readonly batchSize: number;
  private readonly leaseMs: number;
  private readonly pollMs: number;
  private readonly pipelines: number;
  private readonly metrics: BusMetrics;
  private readonly logger: BusLogger;
  private running = false;
  private stopping = false;
  private loops: Promise<void>[] = [];
  private unlisten: (() => Promise<void>) | undefined;
  private lagTimer: NodeJS.Timeout | undefined;
  /** Bumped by every wake-up; a loop that saw an older value knows there may be new rows. */
  private wakeSeq = 0;
  /** Message ids wake-ups named that no claim has taken yet (claimed by key, oldest first). */
  private hints: string[] = [];
  /** A claim of every claimable row is owed: at start, after a wake-up naming no rows, dropped hints or a failure. */
  private fullClaimDue = true;
  /** When the last full claim started (performance.now()): one is made at least every pollMs. */
  private lastFullClaim = 0;
  private readonly waiters = new Set<{ onWake: boolean; done: () => void }>();

  constructor(private readonly opts: OutboxRelayOptions) {
    this.name = opts.name ?? 'relay';
    this.batchSize = opts.batchSize ?? 500;
    this.leaseMs = opts.leaseMs ?? 30_000;
    this.pollMs = opts.pollMs ?? 1_000;
    this.pipelines = Math.max(1, opts.pipelines ?? 2);
    this.metrics = opts.metrics ?? noopBusMetrics;
    this.logger = opts.logger ?? noopBusLogger;
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.unlisten = await this.opts.store.listenOutbox((ids) => this.wake(ids));
    this.lagTimer = setInterval(() => void this.reportLag(), Math.max(this.pollMs, 1_000));
    this.lagTimer.unref();
    this.loops = Array.from({ length: this.pipelines }, (_, i) => this.loop(i));
    this.logger.info({ relay: this.name, batchSize: this.batchSize, pipelines: this.pipelines }, 'outbox relay started');
  }

  /** Stops claiming, waits (bounded) for the batches in flight to be confirmed and marked. */
  async stop(): Promise<void> {
    if (!this.running || this.stopping) return;
    this.stopping = true;
    this.wake();
    clearInterval(this.lagTimer);
    await this.unlisten?.().catch(() => {});
    const timeout = this.opts.drainTimeoutMs ?? 10_000;
    let timer: NodeJS.Timeout | undefined;
    const gaveUp = await Promise.race([
      Promise.all(this.loops).then(() => false),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(true), timeout);
      }),
    ]);
    clearTimeout(timer);
    // Rows still unconfirmed stay claimed until their lease ends, then any relay publishes them again.
    if (gaveUp) this.logger.warn({ relay: this.name, timeoutMs: timeout }, 'relay stopped with confirms still in flight');
    this.running = false;
    this.logger.info({ relay: this.name }, 'outbox relay stopped');
  }

  /** Claims (the oldest claimable rows) and publishes one batch. Exposed for tests and for a one-shot drain. */
  pumpOnce(): Promise<RelayBatchResult> {
    return this.publishBatch(() => this.opts.store.claimOutbox(this.name, this.batchSize, this.leaseMs, this.opts.producers));
  }

  /**
   * The loop's batch: a full claim when one is owed or the last is pollMs old, else the hinted
   * rows by key, else nothing. A pipeline woken with no hint left (another pipeline took the
   * rows its wake-up named) has nothing to claim: every wake-up either named its rows, which a
   * hinted claim takes, or owed a full claim.
   */
  private pumpDue(): Promise<RelayBatchResult> {
    const now = performance.now();
    if (this.fullClaimDue || now - this.lastFullClaim >= this.pollMs) {
      this.fullClaimDue = false;
      this.lastFullClaim = now;
      return this.pumpOnce().then((result) => {
        // A full batch: older rows may be waiting beyond it, hinted or not.
        if (result.claimed >= this.batchSize) this.fullClaimDue = true;
        return result;
      });
    }
    if (this.hints.length === 0) return Promise.resolve({ claimed: 0, published: 0, failed: 0 });
    const ids = this.hints.splice(0, this.batchSize);
    return this.publishBatch(() => this.opts.store.claimOutboxByIds(this.name, ids, this.leaseMs, this.opts.producers));
  }

  private async publishBatch(claim: () => Promise<ClaimedRow[]>): Promise<RelayBatchResult> {
    const rows = await claim();
    if (rows.length === 0) return { claimed: 0, published: 0, failed: 0 };
    const byType = new Map<string, number>();
    for (const r of rows) byType.set(r.type, (byType.get(r.type) ?? 0) + 1);
    for (const [type, n] of byType) this.metrics.published(type, n);

    const outcomes = await Promise.allSettled(rows.map((r) => this.publishRow(r)));
    const confirmed: number[] = [];
    const failed: number[] = [];
    outcomes.forEach((o, i) => (o.status === 'fulfilled' ? confirmed : failed).push(rows[i]!.seq));
    if (confirmed.length > 0) this.metrics.confirmed(confirmed.length);
    // If marking fails the rows stay claimed until the lease ends and are published again: a duplicate, never a loss.
    await this.opts.store.markPublished(confirmed);
    if (failed.length > 0) {
      const first = outcomes.find((o) => o.status === 'rejected') as PromiseRejectedResult;
      this.logger.warn({ relay: this.name, failed: failed.length, err: describeError(first.reason) }, 'publishes not confirmed; released for retry');
      await this.opts.store.releaseOutbox(failed).catch(() => {});
    }
    return { claimed: rows.length, published: confirmed.length, failed: failed.length };
  }

  /**
   * One row to the transport. A row enqueued under a trace is published inside an
   * `outbox.publish` span (a child of the row's traceparent) whose context is the message's
   * `traceparent` header; with tracing off that context is the row's own, passed through.
   */
  private publishRow(r: ClaimedRow): Promise<void> {
    const message = {
      messageId: r.message_id,
      type: r.type,
      routingKey: r.routing_key,
      body: r.body,
      ...(this.opts.transport.needsProducer ? { producer: producerOf(r.body) } : {}),
    };
    if (r.traceparent === null) return this.opts.transport.publish(message);
    const attributes = { 'message.id': r.message_id, 'message.type': r.type };
    return withSpan(SPAN.publish, { parent: r.traceparent, kind: SpanKind.PRODUCER, attributes }, () => this.opts.transport.publish({ ...message, traceparent: currentTraceparent() ?? r.traceparent ?? undefined }));
  }

  private async loop(index: number): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      const seenWake = this.wakeSeq;
      let result: RelayBatchResult | undefined;
      try {
        result = await this.pumpDue();
      } catch (err) {
        this.logger.error({ relay: this.name, loop: index, err: describeError(err) }, 'relay batch failed');
      }
      if (result === undefined || result.failed > 0) {
        // The database or the transport is refusing: back off instead of spinning on the same
        // rows, then claim every claimable row (the released ones, the hints a failed claim took).
        this.fullClaimDue = true;
        failures = Math.min(failures + 1, 6);
        await this.idle(jitteredBackoffMs(100 * 2 ** failures));
        continue;
      }
      failures = 0;
      // A full batch: more rows may be waiting, so another pipeline joins in (if one is idle).
      if (result.claimed >= this.batchSize) this.wakeOne();
      // Hinted rows are waiting: claim them at once.
      else if (this.hints.length > 0) continue;
      // Drained for now: sleep until a wake-up (possibly one that came while we were busy) or the poll.
      else await this.idle(this.pollMs, seenWake);
    }
  }

  /**
   * Waits `ms`. With `seenWake`, a wake-up newer than it (even one that arrived while we were
   * busy) ends the wait early; without it only `stop()` does (a backoff a wake-up must not cut).
   */
  private idle(ms: number, seenWake?: number): Promise<void> {
    if (this.stopping || (seenWake !== undefined && this.wakeSeq !== seenWake)) return Promise.resolve();
    return new Promise((resolve) => {
      const waiter = { onWake: seenWake !== undefined, done: () => {} };
      // A poll that ran out owes a full claim (however recent another pipeline's was).
      const timer = setTimeout(() => {
        if (waiter.onWake) this.fullClaimDue = true;
        waiter.done();
      }, ms);
      waiter.done = () => {
        clearTimeout(timer);
        this.waiters.delete(waiter);
        resolve();
      };
      this.waiters.add(waiter);
    });
  }

  /**
   * A wake-up (or a stop). One idle pipeline is woken — a notification stands for rows a single
   * claim will take; waking every pipeline would send claims that find nothing. A pipeline busy
   * at that moment sees the newer wakeSeq when it finishes and claims once more, so no
   * notification is ever slept through.
   */
  private wake(ids?: readonly string[]): void {
    if (ids === undefined) this.fullClaimDue = true;
    else if (this.hints.length + ids.length > MAX_HINTS) {
      // Far behind (a broker outage): the hints are dropped and one claim takes the oldest rows instead.
      this.hints = [];
      this.fullClaimDue = true;
    } else for (const id of ids) this.hints.push(id);
    this.wakeSeq++;
    if (this.stopping) {
      for (const w of [...this.waiters]) w.done();
      return;
    }
    this.wakeOne();
  }

  /** Wakes one pipeline that waits for a notification, if any does. */
  private wakeOne(): void {
    for (const w of this.waiters) {
      if (w.onWake) {
        w.done();
        return;
      }
    }
  }

  private async reportLag(): Promise<void> {
    try {
      const { pending, lagSeconds } = await this.opts.store.outboxLag();
      this.metrics.outboxLag(lagSeconds, pending);
    } catch (err) {
      this.logger.warn({ relay: this.name, err: describeError(err) }, 'outbox lag query failed');
    }
  }
}

/**
 * The service that enqueued an outbox row: its envelope's sender.service, stamped by that
 * service's own code when it wrote the row (never by the relay). Undefined if unreadable, and a
 * per-service transport then refuses to publish it.
 */
export function producerOf(body: Buffer): string | undefined {
  try {
    const sender = (JSON.parse(body.toString('utf8')) as { sender?: { service?: unknown } }).sender;
    return typeof sender?.service === 'string' ? sender.service : undefined;
  } catch {
    return undefined;
  }
}

/** Builds and starts a relay. */
export async function startOutboxRelay(opts: OutboxRelayOptions): Promise<OutboxRelay> {
  const relay = new OutboxRelay(opts);
  await relay.start();
  return relay;
}
