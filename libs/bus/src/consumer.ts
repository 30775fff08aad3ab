/**
 * The inbox-dedup consumer (DESIGN §3, seed 004 §4): the one pipeline every delivery goes
 * through, on either transport.
 *
 *   size limit → decodeMessage (JSON → envelope schema → type/version → payload schema → hash)
 *   → producer check (identity.ts: the broker-validated user-id speaks for the claimed
 *     sender.service, and that service emits this type; else refused as producer_unauthenticated,
 *     producer_unknown, sender_mismatch or type_not_permitted)
 *   → ONE unit of work: inbox row + the handler's state change + its outbox rows → COMMIT → ack
 *
 * Each decoded delivery runs in a `message.consume` span whose parent is the publisher's trace
 * context (the `traceparent` header, else the envelope's), so whatever the handler stamps
 * continues the same trace — in batched mode too (each handler runs in its own delivery's context).
 *
 * Outcomes:
 * - new message: the handler runs inside the unit of work; ack after COMMIT.
 * - same id + same payload hash (a redelivery): the prior disposition stands, nothing the
 *   handler would write is written, ack, counted as a duplicate. A delivery taken in a batch
 *   finds its row before any handler runs; one consumed alone has its row carried by the
 *   handler's first statement (Store.unitOfWorkOnInbox), so its handler runs up to that
 *   statement, which fails with the row.
 * - same id + different hash: refused — recorded in dead_letters, dead-lettered, counted; the
 *   first disposition and its effects stand.
 * - undecodable (oversized, malformed JSON, invalid envelope/payload, unknown type or version,
 *   hash mismatch) or a type this service has no handler for: refused without guessing at the
 *   content, recorded with a reason and a detail naming the field, dead-lettered, counted.
 * - the handler refuses it (`refusedBecause`: its persisted-assignment check failed, §4, before
 *   it wrote anything): the inbox row is recorded 'refused' with a dead_letters row in the same
 *   unit of work, then the delivery is dead-lettered and counted as `assignment_refused`; a
 *   redelivery is a duplicate of that refusal.
 * - handler or database failure: the unit of work rolls back; transient database errors are
 *   retried in place (a database that is down is waited out, see withTransientRetry) and, if
 *   still failing, requeued — never dead-lettered here; anything else is requeued and comes back
 *   until the queue's delivery limit (x-delivery-limit), whose last attempt is recorded and
 *   dead-lettered.
 *
 * Batched mode (`batchSize` > 1, opt-in per service): the deliveries that are ready together
 * (up to `batchSize`) share ONE unit of work — one statement records all their inbox rows (with
 * BEGIN), each handler runs in turn inside the same transaction, one COMMIT, then each is acked.
 * The per-delivery contract is unchanged: a delivery's inbox row, state change and outbox rows
 * commit together (with the rest of the batch) or not at all, and nothing is acked before
 * COMMIT. If any part of the batch fails, the transaction rolls back as a whole and EVERY
 * delivery of it is processed again alone (the single path, with its retries, requeues and
 * dead-letters), so one bad delivery cannot sink the others. A delivery whose id is already in
 * the inbox (a redelivery or a hash conflict) is settled alone after the batch. Every service
 * consumes this way; a delivery that arrives alone still has a unit of work of its own.
 *
 * Ordering: deliveries are processed concurrently (up to `prefetch`) and redeliveries overtake
 * later messages, so delivery order means nothing. Handlers protect ordering themselves (DESIGN
 * §3): plan revisions carry the expected revision and row version and an out-of-order one is
 * refused; fenced writes name their epoch; a Cancel is applied against the task's current state,
 * never queued behind a completion. A handler also checks the claimed sender and lineage against
 * persisted assignments: a decoded envelope is well-formed, not authenticated.
 */
import { DEFAULT_MAX_MESSAGE_BYTES, EverdictError, decodeMessage, isEverdictError, isUuid, jitteredBackoffMs } from '@everdict/contracts';
import type { AnyEnvelope, MessageType } from '@everdict/contracts';
import { inlinable, recordRefusalIn, setInboxDispositions } from '@everdict/store';
import type { Store, UnitOfWork } from '@everdict/store';
import { SPAN, SpanKind, captureContext, isTraceparent, runInContext, withSpan } from '@everdict/tracing';
import type { TraceContext } from '@everdict/tracing';
import { authenticateProducer } from './identity.js';
import type { ProducerRefusal } from './identity.js';
import type { BusLogger } from './logger.js';
import { describeError, noopBusLogger } from './logger.js';
import type { BusMetrics } from './metrics.js';
import { noopBusMetrics } from './metrics.js';
import { boundTypes, deliveryLimit } from './topology.js';
import type { Delivery, Settlement, Subscription, Transport } from './transport.js';

/**
 * A handler's refusal of a message its persisted-assignment check failed (§4): the handler has
 * written nothing. The inbox row is recorded 'refused' (a redelivery is a duplicate, never
 * recorded again) together with the dead_letters row, in the delivery's unit of work; then the delivery
 * is dead-lettered and counted as `assignment_refused`.
 */
export interface Refused {
  readonly refused: string;
}

/** Refuses the message with `why` (ids and reasons only: never message content). */
export const refusedBecause = (why: string): Refused => ({ refused: why.slice(0, 2000) });

/** What a handler made of a new message; recorded as the inbox disposition (void = applied). */
export type HandlerOutcome = 'applied' | 'ignored' | Refused | void;

export interface HandlerContext {
  /** The consuming service (inbox consumer name and queue suffix). */
  readonly service: string;
  /** Earlier returned deliveries of this message (0 on the first). */
  readonly deliveryCount: number;
  readonly redelivered: boolean;
  readonly transport: Transport['kind'];
  /**
   * Registers `fn` to run once the unit of work this handler runs in has COMMITTED (never if it
   * rolls back, e.g. when a batch fails and every delivery of it is processed again alone). For
   * in-memory effects of a handler that must follow its durable state, like a claimed task.
   * Always set by the consumer; optional so a test may call a handler directly.
   */
  readonly afterCommit?: (fn: () => void) => void;
}

/**
 * A message handler: runs inside the delivery's unit of work. Everything it writes — state,
 * ledger, outbox rows — commits together with the inbox row or not at all. It must not publish
 * or call anything external: outgoing messages go through `uow.enqueue`. Before its first
 * statement it may only read its envelope: a duplicate consumed alone runs it that far, and the
 * first statement (which carries the inbox row) is where the duplicate stops.
 */
export type MessageHandler<E extends AnyEnvelope = AnyEnvelope> = (envelope: E, uow: UnitOfWork, ctx: HandlerContext) => Promise<HandlerOutcome>;

export type MessageHandlers = { readonly [T in MessageType]?: MessageHandler<Extract<AnyEnvelope, { type: T }>> };

/** Why the edge refused a delivery (decode reasons plus the consumer's own). */
type RefusalReason =
  | 'oversized'
  | 'malformed_json'
  | 'invalid_envelope'
  | 'unknown_type'
  | 'unknown_version'
  | 'invalid_payload'
  | 'hash_mismatch'
  | 'message_id_mismatch'
  | 'hash_conflict'
  | 'unhandled_type'
  | ProducerRefusal
  | 'assignment_refused';

/** A refused delivery as recorded in dead_letters: only ids that were well-formed, never content. */
export interface Refusal {
  readonly service: string;
  readonly reason: RefusalReason;
  readonly detail: string;
  readonly messageId?: string | undefined;
  readonly type?: string | undefined;
  /** Well-formed ids salvaged from a refused decode (DecodeResult), for the refusal hook. */
  readonly version?: number | undefined;
  readonly caseId?: string | undefined;
  readonly payloadHash?: string | undefined;
  readonly targetTaskId?: string | undefined;
}

interface InboxConsumerOptions {
  readonly store: Store;
  readonly transport: Transport;
  /** The consuming service: its queue is `<prefix>.<service>`, its inbox rows carry this name. */
  readonly service: string;
  /** One handler per message type bound to the service's queue (checked at start). */
  readonly handlers: MessageHandlers;
  /** Unsettled deliveries at once, i.e. concurrent units of work (default 32). */
  readonly prefetch?: number;
  /**
   * Most deliveries sharing one unit of work (default 1: every delivery has its own). Only for
   * services whose handlers write nothing but their unit of work (in-memory effects go through
   * `ctx.afterCommit`), since a failed batch runs every handler of it again.
   */
  readonly batchSize?: number;
  /** Largest accepted body in bytes (default DEFAULT_MAX_MESSAGE_BYTES, 1 MiB). */
  readonly maxBytes?: number;
  /** In-place retries of a unit of work that failed with a retryable database error (default 3). */
  readonly transientRetries?: number;
  /** How long a delivery waits in place for a database that is down before it is requeued (default 30 000 ms). */
  readonly outageWaitMs?: number;
  /** Base backoff for those retries and before a requeue, in ms (default 100; doubles, max 2000; jittered). */
  readonly retryDelayMs?: number;
  /**
   * Called after a refusal is recorded and before it is dead-lettered — e.g. the turn-worker parks
   * the case's waiting task as `capability_gap` on an unknown type or version (DESIGN §3). Runs
   * its own unit of work if it needs one; a failure is logged and does not stop the dead-letter.
   */
  readonly onRefusal?: (refusal: Refusal) => Promise<void>;
  /**
   * Batched mode only: runs in the batch's unit of work after its inbox rows are recorded and
   * before its handlers, with the new deliveries in handling order — e.g. the turn-worker claims
   * every task the batch's `task.runnable`s name in one statement (claimTasksAhead). It must
   * leave each handler's outcome as it would be without it; a failure fails the batch, whose
   * deliveries are then processed alone (where it does not run).
   */
  readonly beforeBatch?: (fresh: readonly AnyEnvelope[], uow: UnitOfWork) => Promise<void>;
  readonly metrics?: BusMetrics;
  readonly logger?: BusLogger;
  /**
   * BENCHMARK BASELINE ONLY: skip the inbox row. Without it a redelivery runs the handler again;
   * no service may set this.
   */
  readonly unsafeSkipInbox?: boolean;
}

/**
 * Settlement of a delivery whose unit of work failed: requeue, unless this was the last allowed
 * attempt. A retryable failure (the database restarting, a lost connection, a conflict) says
 * nothing about the message: it is always requeued, never dead-lettered by the consumer.
 */
export function failureSettlement(deliveryCount: number, limit: number, retryable = false): Extract<Settlement, 'requeue' | 'dead_letter'> {
  return !retryable && deliveryCount >= limit ? 'dead_letter' : 'requeue';
}

/** Backoff before retry `attempt` (0-based): base · 2^attempt, capped at 2 s. */
export function backoffMs(attempt: number, baseMs: number): number {
  return Math.min(baseMs * 2 ** attempt, 2_000);
}

type UnitResult = { kind: 'applied' | 'ignored' } | { kind: 'refused'; why: string } | { kind: 'duplicate'; disposition: string } | { kind: 'conflict'; storedHash: string };

const isRefused = (o: HandlerOutcome): o is Refused => typeof o === 'object' && o !== null;

/** The task a message is about (`payload.taskId`), for log lines and span attributes. */
function taskIdOf(env: AnyEnvelope): string | undefined {
  const taskId = (env.payload as { taskId?: unknown }).taskId;
  return typeof taskId === 'string' ? taskId : undefined;
}

/** A delivery waiting for its batch. */
interface Queued {
  readonly env: AnyEnvelope;
  readonly handler: MessageHandler;
  readonly ctx: Omit<HandlerContext, 'afterCommit'>;
  /** The delivery's trace context: its handler runs in it even inside a shared batch. */
  readonly trace: TraceContext;
  resolve(r: UnitResult): void;
  reject(err: unknown): void;
}

/**
 * Units of work of batched deliveries in flight at once; later deliveries wait and form the next
 * batch. Enough that a slow batch (a lock wait) does not hold up every delivery behind it.
 */
const BATCHES_IN_FLIGHT = 8;

export class InboxConsumer {
  private readonly metrics: BusMetrics;
  private readonly logger: BusLogger;
  private readonly maxBytes: number;
  private readonly limit: number;
  private readonly retries: number;
  private readonly outageWaitMs: number;
  private readonly delayMs: number;
  private readonly abort = new AbortController();
  private subscription: Subscription | undefined;
  private readonly batchSize: number;
  private queue: Queued[] = [];
  private batchesInFlight = 0;
  private flushScheduled = false;

  constructor(private readonly opts: InboxConsumerOptions) {
    this.metrics = opts.metrics ?? noopBusMetrics;
    this.logger = opts.logger ?? noopBusLogger;
    this.maxBytes = opts.maxBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.limit = deliveryLimit(opts.transport.topology, opts.service);
    this.retries = opts.transientRetries ?? 3;
    this.outageWaitMs = opts.outageWaitMs ?? 30_000;
    this.delayMs = opts.retryDelayMs ?? 100;
    this.batchSize = Math.max(1, Math.floor(opts.batchSize ?? 1));
    const missing = boundTypes(opts.transport.topology, opts.service).filter((t) => !(t in opts.handlers));
    if (missing.length > 0) {
      throw new EverdictError('config_invalid', `consumer ${opts.service} has no handler for bound message types: ${missing.join(', ')}`, {
        details: { field: `handlers.${missing[0]}`, missing },
      });
    }
  }

  get service(): string {
    return this.opts.service;
  }

  async start(): Promise<void> {
    if (this.subscription) return;
    this.subscription = await this.opts.transport.subscribe(this.opts.service, (d) => this.process(d), { prefetch: this.opts.prefetch ?? 32 });
    this.logger.info({ service: this.opts.service, transport: this.opts.transport.kind }, 'consuming');
  }

  /** No new deliveries; in-flight units of work finish and are settled; then the channel closes. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.subscription?.stop();
    this.logger.info({ service: this.opts.service }, 'consumer stopped');
  }

  /** The whole pipeline for one delivery. Never throws: every path ends in a settlement. */
  async process(d: Delivery): Promise<Settlement> {
    const service = this.opts.service;
    const decoded = decodeMessage(d.body, { maxBytes: this.maxBytes });
    if (!decoded.ok) {
      // The transport's message id is recorded only if well-formed: a refusal never stores raw input.
      return this.refuse(decoded.reason, decoded.detail, {
        messageId: decoded.messageId ?? (isUuid(d.messageId) ? d.messageId : undefined),
        type: decoded.type,
        ...(decoded.payloadHash !== undefined ? { payloadHash: decoded.payloadHash } : {}),
        salvaged: { version: decoded.version, caseId: decoded.caseId, targetTaskId: decoded.targetTaskId },
      });
    }
    const env = decoded.envelope;
    // The delivery's span continues the publisher's trace: the broker header (the relay's span),
    // else the envelope's own traceparent; with neither it starts a trace of its own.
    const parent = isTraceparent(d.traceparent) ? d.traceparent : (env.traceparent ?? null);
    const attributes = { consumer: service, 'message.id': env.id, 'message.type': env.type, 'case.id': env.caseId, 'task.id': taskIdOf(env) };
    return withSpan(SPAN.consume, { parent, kind: SpanKind.CONSUMER, attributes }, async (span) => {
      const settlement = await this.processDecoded(d, env);
      span.set({ outcome: settlement });
      return settlement;
    });
  }

  /** The pipeline after a successful decode, inside the delivery's span. Never throws. */
  private async processDecoded(d: Delivery, env: AnyEnvelope): Promise<Settlement> {
    const service = this.opts.service;
    if (d.messageId !== undefined && d.messageId !== env.id) {
      return this.refuse('message_id_mismatch', 'properties.message-id differs from /id', { messageId: env.id, type: env.type, payloadHash: env.payloadHash });
    }
    // The authenticated producer (the broker-validated user-id) must speak for the claimed sender
    // service, and that service must emit this type. Nothing of the envelope is trusted before.
    const forged = authenticateProducer(this.opts.transport.identity, d.userId, env.sender.service, env.type);
    if (forged) return this.refuse(forged.reason, forged.detail, { messageId: env.id, type: env.type, payloadHash: env.payloadHash });
    const handler = this.opts.handlers[env.type] as MessageHandler | undefined;
    if (!handler) {
      return this.refuse('unhandled_type', `/type ${env.type} has no handler in ${service}`, { messageId: env.id, type: env.type, payloadHash: env.payloadHash });
    }
    const ctx = { service, deliveryCount: d.deliveryCount, redelivered: d.redelivered, transport: this.opts.transport.kind };

    const started = performance.now();
    let result: UnitResult;
    try {
      result = this.batchSize > 1 && inlinable(service, { messageId: env.id, payloadHash: env.payloadHash, type: env.type }) ? await this.batched(env, handler, ctx) : await this.alone(env, handler, ctx);
    } catch (err) {
      return this.handlerFailed(env, d, err);
    } finally {
      this.metrics.handlerSeconds(service, (performance.now() - started) / 1000);
    }

    switch (result.kind) {
      case 'applied':
      case 'ignored':
        this.metrics.consumed(service, 'applied');
        return 'ack';
      case 'refused':
        // Recorded with the inbox row in its unit of work; only the count and the settlement remain.
        this.logger.warn({ service, reason: 'assignment_refused', messageId: env.id, type: env.type, caseId: env.caseId, taskId: taskIdOf(env), why: result.why }, 'message refused by its receiver and dead-lettered');
        this.metrics.refused(service, 'assignment_refused');
        this.metrics.deadLettered(service, 'assignment_refused');
        this.metrics.consumed(service, 'refused');
        return 'dead_letter';
      case 'duplicate':
        this.metrics.duplicate(service);
        this.metrics.consumed(service, 'duplicate');
        this.logger.debug({ service, messageId: env.id, type: env.type, disposition: result.disposition }, 'duplicate delivery');
        return 'ack';
      case 'conflict':
        return this.refuse('hash_conflict', `/payloadHash ${env.payloadHash} differs from the recorded ${result.storedHash} for this message id`, {
          messageId: env.id,
          type: env.type,
          payloadHash: env.payloadHash,
        });
    }
  }

  /** One delivery in its own unit of work, retried in place on transient database errors. */
  private alone(env: AnyEnvelope, handler: MessageHandler, ctx: Omit<HandlerContext, 'afterCommit'>): Promise<UnitResult> {
    return this.withTransientRetry(() => this.unitOfWork(env, handler, ctx));
  }

  private async unitOfWork(env: AnyEnvelope, handler: MessageHandler, base: Omit<HandlerContext, 'afterCommit'>): Promise<UnitResult> {
    const service = this.opts.service;
    const committed: (() => void)[] = [];
    const ctx: HandlerContext = { ...base, afterCommit: (fn) => void committed.push(fn) };
    const work = async (uow: UnitOfWork): Promise<UnitResult> => {
      const outcome = (await handler(env, uow, ctx)) ?? 'applied';
      if (isRefused(outcome)) {
        if (!this.opts.unsafeSkipInbox) await uow.setInboxDisposition(service, env.id, 'refused');
        await recordRefusalIn(uow, { consumer: service, messageId: env.id, type: env.type, reason: 'assignment_refused', detail: outcome.refused, payloadHash: env.payloadHash });
        return { kind: 'refused', why: outcome.refused };
      }
      if (outcome === 'ignored' && !this.opts.unsafeSkipInbox) await uow.setInboxDisposition(service, env.id, 'ignored');
      return { kind: outcome };
    };
    let result: UnitResult;
    if (this.opts.unsafeSkipInbox) result = await this.opts.store.unitOfWork(work);
    else {
      // The inbox row rides with the handler's first statement (or goes alone ahead of it): a
      // concurrent redelivery waits for us to commit, then settles as a duplicate, its
      // statement failing with nothing written.
      const done = await this.opts.store.unitOfWorkOnInbox({ consumer: service, messageId: env.id, payloadHash: env.payloadHash, type: env.type, disposition: 'applied' }, work);
      if (done.kind !== 'new') return done;
      result = done.value;
    }
    for (const fn of committed) fn();
    return result;
  }

  /** Queues a delivery for the next batch; resolves once its batch committed (or it was settled alone). */
  private batched(env: AnyEnvelope, handler: MessageHandler, ctx: Omit<HandlerContext, 'afterCommit'>): Promise<UnitResult> {
    return new Promise<UnitResult>((resolve, reject) => {
      this.queue.push({ env, handler, ctx, trace: captureContext(), resolve, reject });
      this.kick();
    });
  }

  private kick(): void {
    if (this.flushScheduled || this.batchesInFlight >= BATCHES_IN_FLIGHT || this.queue.length === 0) return;
    this.flushScheduled = true;
    // Deliveries that become ready in the same tick join the same batch.
    queueMicrotask(() => {
      this.flushScheduled = false;
      if (this.batchesInFlight < BATCHES_IN_FLIGHT && this.queue.length > 0) void this.flushBatch();
    });
  }

  /** The next batch: up to `batchSize` deliveries in arrival order, at most one per message id. */
  private takeBatch(): Queued[] {
    const batch: Queued[] = [];
    const rest: Queued[] = [];
    const ids = new Set<string>();
    for (const q of this.queue) {
      if (batch.length >= this.batchSize || ids.has(q.env.id)) rest.push(q);
      else {
        batch.push(q);
        ids.add(q.env.id);
      }
    }
    this.queue = rest;
    return batch;
  }

  private async flushBatch(): Promise<void> {
    const batch = this.takeBatch();
    if (batch.length === 0) return;
    this.batchesInFlight++;
    this.kick();
    let settled: { results: (UnitResult | null)[]; committed: (() => void)[] } | null;
    try {
      if (batch.length === 1) {
        const only = batch[0]!;
        await runInContext(only.trace, () => this.alone(only.env, only.handler, only.ctx)).then(only.resolve, only.reject);
        return;
      }
      settled = await this.batchUnit(batch).catch(() => null);
    } finally {
      // The batch's own unit of work is over: the next batch may start while the deliveries
      // settled alone below (with their retries and backoffs) take their time.
      this.batchesInFlight--;
      this.kick();
    }
    if (settled === null) {
      // Nothing of the batch was written: every delivery is processed again, alone, with the
      // single path's retries and failure handling (the failing one is requeued or dead-lettered
      // there, the others simply apply).
      for (const q of batch) void runInContext(q.trace, () => this.alone(q.env, q.handler, q.ctx)).then(q.resolve, q.reject);
      return;
    }
    const { results, committed } = settled;
    for (const fn of committed) fn();
    batch.forEach((q, i) => {
      const r = results[i];
      // Already in the inbox: a duplicate or a conflict, told apart by the single path.
      if (r === null || r === undefined) void runInContext(q.trace, () => this.alone(q.env, q.handler, q.ctx)).then(q.resolve, q.reject);
      else q.resolve(r);
    });
  }

  /** ONE unit of work for the batch: inbox rows, each new delivery's handler in order, dispositions. */
  private batchUnit(batch: readonly Queued[]): Promise<{ results: (UnitResult | null)[]; committed: (() => void)[] }> {
    const service = this.opts.service;
    const work = async (uow: UnitOfWork, fresh: ReadonlySet<string>) => {
      const committed: (() => void)[] = [];
      const results: (UnitResult | null)[] = [];
      const ignored: string[] = [];
      const refused: string[] = [];
      if (this.opts.beforeBatch) await this.opts.beforeBatch(batch.filter((q) => fresh.has(q.env.id)).map((q) => q.env), uow);
      for (const q of batch) {
        if (!fresh.has(q.env.id)) {
          results.push(null);
          continue;
        }
        const outcome = (await runInContext(q.trace, () => q.handler(q.env, uow, { ...q.ctx, afterCommit: (fn) => void committed.push(fn) }))) ?? 'applied';
        if (isRefused(outcome)) {
          refused.push(q.env.id);
          await recordRefusalIn(uow, { consumer: service, messageId: q.env.id, type: q.env.type, reason: 'assignment_refused', detail: outcome.refused, payloadHash: q.env.payloadHash });
          results.push({ kind: 'refused', why: outcome.refused });
          continue;
        }
        if (outcome === 'ignored') ignored.push(q.env.id);
        results.push({ kind: outcome });
      }
      if (!this.opts.unsafeSkipInbox) {
        await setInboxDispositions(uow, service, ignored, 'ignored');
        await setInboxDispositions(uow, service, refused, 'refused');
      }
      return { results, committed };
    };
    if (this.opts.unsafeSkipInbox) return this.opts.store.unitOfWork((uow) => work(uow, new Set(batch.map((q) => q.env.id))));
    return this.opts.store.unitOfWorkOnInboxBatch(
      service,
      batch.map((q) => ({ messageId: q.env.id, payloadHash: q.env.payloadHash, type: q.env.type })),
      work,
    );
  }

  private async handlerFailed(env: AnyEnvelope, d: Delivery, err: unknown): Promise<Settlement> {
    const service = this.opts.service;
    const retryable = isEverdictError(err) && err.retryable;
    const settlement = failureSettlement(d.deliveryCount, this.limit, retryable);
    if (settlement === 'dead_letter') {
      this.logger.error({ service, messageId: env.id, type: env.type, caseId: env.caseId, taskId: taskIdOf(env), attempts: d.deliveryCount + 1, err: describeError(err) }, 'handler failed on its last attempt; dead-lettering');
      await this.record({ reason: 'handler_failed', detail: `attempt ${d.deliveryCount + 1} of ${this.limit + 1}: ${describeError(err)}`, messageId: env.id, type: env.type, payloadHash: env.payloadHash }).catch(
        (recErr: unknown) => this.logger.error({ service, messageId: env.id, err: describeError(recErr) }, 'could not record dead letter'),
      );
      this.metrics.deadLettered(service, 'handler_failed');
      this.metrics.consumed(service, 'dead_lettered');
      return 'dead_letter';
    }
    this.logger.warn({ service, messageId: env.id, type: env.type, caseId: env.caseId, taskId: taskIdOf(env), attempt: d.deliveryCount + 1, retryable, err: describeError(err) }, 'handler failed; requeueing');
    this.metrics.consumed(service, 'failed');
    await this.sleep(jitteredBackoffMs(backoffMs(d.deliveryCount, this.delayMs)));
    return 'requeue';
  }

  private async refuse(
    reason: RefusalReason,
    detail: string,
    ids: { messageId?: string | undefined; type?: string | undefined; payloadHash?: string; salvaged?: Pick<Refusal, 'version' | 'caseId' | 'targetTaskId'> },
  ): Promise<Settlement> {
    const service = this.opts.service;
    try {
      await this.withTransientRetry(() => this.record({ reason, detail, messageId: ids.messageId, type: ids.type, payloadHash: ids.payloadHash }));
    } catch (err) {
      // Unrecorded refusals are not dead-lettered: the redelivery gets recorded, or the delivery limit ends it.
      this.logger.error({ service, reason, err: describeError(err) }, 'could not record refusal; requeueing');
      this.metrics.consumed(service, 'failed');
      return 'requeue';
    }
    if (this.opts.onRefusal) {
      await this.opts.onRefusal({ service, reason, detail, messageId: ids.messageId, type: ids.type, payloadHash: ids.payloadHash, ...ids.salvaged }).catch((err: unknown) =>
        this.logger.error({ service, reason, messageId: ids.messageId, err: describeError(err) }, 'refusal hook failed'),
      );
    }
    this.logger.warn({ service, reason, messageId: ids.messageId, type: ids.type }, 'message refused and dead-lettered');
    this.metrics.refused(service, reason);
    this.metrics.deadLettered(service, reason);
    this.metrics.consumed(service, 'refused');
    return 'dead_letter';
  }

  private record(d: { reason: string; detail: string; messageId?: string | undefined; type?: string | undefined; payloadHash?: string | undefined }): Promise<void> {
    return this.opts.store.recordDeadLetter({
      consumer: this.opts.service,
      reason: d.reason,
      detail: d.detail,
      messageId: d.messageId ?? null,
      type: d.type ?? null,
      payloadHash: d.payloadHash ?? null,
    });
  }

  /**
   * Retries retryable database failures (conflicts, lost connections) without spending a
   * delivery. A database that is down (restarting) is waited out in place for up to
   * `outageWaitMs`, however many attempts that takes: the broker counts every requeue toward
   * x-delivery-limit, so requeueing through an outage would dead-letter good messages.
   */
  private async withTransientRetry<T>(fn: () => Promise<T>): Promise<T> {
    const since = performance.now();
    for (let attempt = 0; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        const retryable = isEverdictError(err) && err.retryable;
        const outage = isEverdictError(err, 'database_unavailable') && performance.now() - since < this.outageWaitMs;
        if (!retryable || (attempt >= this.retries && !outage) || this.abort.signal.aborted) throw err;
        await this.sleep(jitteredBackoffMs(backoffMs(attempt, this.delayMs)));
      }
    }
  }

  /** A pause that a stop cuts short, so a draining consumer never waits out a backoff. */
  private sleep(ms: number): Promise<void> {
    if (this.abort.signal.aborted || ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.abort.signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.abort.signal.addEventListener('abort', done);
    });
  }
}

/** Builds and starts an inbox consumer. */
export async function startInboxConsumer(opts: InboxConsumerOptions): Promise<InboxConsumer> {
  const consumer = new InboxConsumer(opts);
  await consumer.start();
  return consumer;
}
