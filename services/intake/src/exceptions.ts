/**
 * What an on-call operator acts on (issue 14 item 1), role `operator`:
 *
 *   GET  /v1/exceptions                 parked tasks by class and age, unknown effect outcomes (call id,
 *                                       case, age, operation), dead letters held by the broker, the
 *                                       consumers' recorded refusals, restore failures
 *   POST /v1/dead-letters/:id/replay    replays the dead letter with message id `:id`
 *
 * Dead letters live in the broker's `<prefix>.<service>.dead` queues (libs/bus topology). Inspection
 * takes them with basic.get WITHOUT acknowledging and closes the channel, which hands every one
 * back to its queue: nothing is lost by looking. A replay republishes the message, properties
 * intact (message id, type, user id), through the default exchange to the very queue that
 * dead-lettered it (x-death), so only that consumer receives it again and its inbox dedup applies
 * (a message already applied is a duplicate, never a second effect). The dead letter is
 * acknowledged — removed — only after the broker confirmed the republish; if the confirm fails
 * or the channel dies first, it stays in its queue (at least once, the inbox makes it once).
 * Under per-service broker users the republish keeps the original user id, which the broker
 * accepts only from a user tagged `impersonator`; otherwise the replay is refused (409) and the
 * dead letter stays.
 *
 * Ownership: every read is filtered by the principal's customers; a broker message whose case
 * the principal may not see (or that names no case) is shown only to an unrestricted operator.
 */
import type { ServerResponse } from 'node:http';
import type amqplib from 'amqplib';
import { isUuid } from '@everdict/contracts';
import type { Topology } from '@everdict/bus';
import { sendError, sendJson, seesCustomer } from '@everdict/http-api';
import type { Principal } from '@everdict/http-api';
import { customersOfCases, loadParkedByClass, loadRecordedRefusals, loadRestoreFailures, loadUnknownOutcomes } from '@everdict/store';
import type { ParkedClassRow, RefusalRow, RestoreFailureRow, Store, UnknownOutcomeRow } from '@everdict/store';
import { lazyBrokerConnection } from './brokerConnection.js';
import type { LazyBrokerConnection } from './brokerConnection.js';
import { INTAKE_SERVICE } from './open.js';

export const EXCEPTIONS_ROLE = 'operator';

/** Messages looked at per dead-letter queue for one inspection or replay search. */
const PEEK_LIMIT = 200;
/** An effect `intent` older than this never reported back: shown with the unknown outcomes. */
const STALE_INTENT_MS = 5 * 60_000;

/** A dead letter as the console shows it: ids and routing facts, never the payload. */
export interface DeadLetter {
  readonly id: string;
  readonly queue: string;
  /** The queue that dead-lettered it (where a replay goes). */
  readonly originalQueue: string | null;
  readonly reason: string | null;
  readonly deaths: number;
  readonly deadLetteredAt: string | null;
  readonly type: string | null;
  readonly caseId: string | null;
  readonly sender: string | null;
  readonly sizeBytes: number;
}

type XDeath = { queue?: unknown; reason?: unknown; count?: unknown; time?: unknown };

/** The console's view of one broker message. Pure. */
export function describeDeadLetter(queue: string, msg: Pick<amqplib.Message, 'content' | 'properties'>): DeadLetter {
  const deaths = (msg.properties.headers?.['x-death'] as XDeath[] | undefined) ?? [];
  const first = deaths[0];
  let envelope: { caseId?: unknown; type?: unknown; sender?: { service?: unknown } } = {};
  try {
    envelope = JSON.parse(msg.content.toString('utf8')) as typeof envelope;
  } catch {
    // A body that is not JSON is still a dead letter; it just names no case.
  }
  const time = first?.time as { value?: unknown } | number | undefined;
  const seconds = typeof time === 'number' ? time : typeof time?.value === 'number' ? time.value : undefined;
  return {
    id: typeof msg.properties.messageId === 'string' ? msg.properties.messageId : '',
    queue,
    originalQueue: typeof first?.queue === 'string' ? first.queue : null,
    reason: typeof first?.reason === 'string' ? first.reason : null,
    deaths: deaths.reduce((n, d) => n + (typeof d.count === 'number' ? d.count : 1), 0),
    deadLetteredAt: seconds === undefined ? null : new Date(seconds * 1000).toISOString(),
    type: typeof msg.properties.type === 'string' ? msg.properties.type : typeof envelope.type === 'string' ? envelope.type : null,
    caseId: typeof envelope.caseId === 'string' ? envelope.caseId : null,
    sender: typeof envelope.sender?.service === 'string' ? envelope.sender.service : null,
    sizeBytes: msg.content.length,
  };
}

export class ReplayRefused extends Error {
  constructor(readonly error: 'dead_letter_not_found' | 'replay_refused' | 'replay_unconfirmed', message: string) {
    super(message);
  }
}

/** The broker side: the dead-letter queues of the topology, peeked and replayed. */
export class DeadLetterBroker {
  private readonly broker: LazyBrokerConnection;

  constructor(
    amqpUrl: string,
    private readonly topology: Topology,
  ) {
    this.broker = lazyBrokerConnection(amqpUrl);
  }

  /** The `.dead` queues (each consuming service's dead-letter target). */
  queues(): string[] {
    return this.topology.queues.filter((q) => q.name.endsWith('.dead')).map((q) => q.name);
  }

  /** Every dead letter (up to PEEK_LIMIT per queue) with each queue's depth; nothing is removed. */
  async peek(): Promise<{ queues: { queue: string; messages: number }[]; messages: DeadLetter[] }> {
    const c = await this.broker.get();
    const queues: { queue: string; messages: number }[] = [];
    const messages: DeadLetter[] = [];
    for (const queue of this.queues()) {
      const ch = await c.createChannel();
      ch.on('error', () => undefined);
      try {
        const ok = await ch.checkQueue(queue);
        queues.push({ queue, messages: ok.messageCount });
        for (let i = 0; i < Math.min(ok.messageCount, PEEK_LIMIT); i++) {
          const m = await ch.get(queue, { noAck: false });
          if (m === false) break;
          messages.push(describeDeadLetter(queue, m));
        }
      } finally {
        // Closing with the gets unacknowledged returns every one of them to its queue.
        await ch.close().catch(() => undefined);
      }
    }
    return { queues, messages };
  }

  /**
   * Republishes dead letter `id` to the queue that dead-lettered it and removes it only after the
   * broker's confirm. `allowed` sees the message first (ownership); false = not found.
   */
  async replay(id: string, allowed: (d: DeadLetter) => Promise<boolean>): Promise<DeadLetter> {
    const c = await this.broker.get();
    for (const queue of this.queues()) {
      const ch = await c.createConfirmChannel();
      let channelError: unknown;
      ch.on('error', (err: unknown) => {
        channelError = err;
      });
      try {
        for (let i = 0; i < PEEK_LIMIT; i++) {
          const m = await ch.get(queue, { noAck: false });
          if (m === false) break;
          if (m.properties.messageId !== id) continue;
          const d = describeDeadLetter(queue, m);
          if (!(await allowed(d))) throw new ReplayRefused('dead_letter_not_found', 'no such dead letter');
          if (d.originalQueue === null) throw new ReplayRefused('replay_refused', 'the dead letter names no queue it came from (no x-death header)');
          const { 'x-death': _death, 'x-first-death-exchange': _fx, 'x-first-death-queue': _fq, 'x-first-death-reason': _fr, ...headers } = (m.properties.headers ?? {}) as Record<string, unknown>;
          const props: amqplib.Options.Publish = {
            persistent: true,
            messageId: m.properties.messageId as string,
            headers,
            ...(typeof m.properties.type === 'string' ? { type: m.properties.type } : {}),
            ...(typeof m.properties.contentType === 'string' ? { contentType: m.properties.contentType } : {}),
            ...(typeof m.properties.userId === 'string' ? { userId: m.properties.userId } : {}),
            ...(typeof m.properties.correlationId === 'string' ? { correlationId: m.properties.correlationId } : {}),
          };
          ch.publish('', d.originalQueue, m.content, props);
          try {
            await ch.waitForConfirms();
          } catch (err) {
            if (channelError !== undefined) throw new ReplayRefused('replay_refused', `the broker refused the republish (${describeError(channelError)}); the dead letter stays`);
            throw new ReplayRefused('replay_unconfirmed', `the broker did not confirm the republish (${describeError(err)}); the dead letter stays`);
          }
          // Confirmed: only now may the dead letter go.
          ch.ack(m);
          await ch.waitForConfirms().catch(() => undefined);
          return d;
        }
      } finally {
        // Every other message looked at goes back to its queue unacknowledged.
        await ch.close().catch(() => undefined);
      }
    }
    throw new ReplayRefused('dead_letter_not_found', 'no such dead letter');
  }

  close(): Promise<void> {
    return this.broker.close();
  }
}

function describeError(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

// ------------------------------------------------------------------------------- views (pure)

const ageSeconds = (now: Date, at: Date | string | null): number | null => (at === null ? null : Math.max(0, Math.round((now.getTime() - new Date(at).getTime()) / 1000)));

export function exceptionsView(
  now: Date,
  r: { parked: ParkedClassRow[]; unknown: UnknownOutcomeRow[]; restore: RestoreFailureRow[]; refusals: RefusalRow[]; deadLetters: { available: boolean; error?: string; queues: { queue: string; messages: number }[]; messages: DeadLetter[] } },
) {
  return {
    at: now.toISOString(),
    parked: r.parked.map((p) => ({
      class: p.park_reason,
      tasks: p.tasks,
      oldestParkedAt: p.oldest_parked_at?.toISOString() ?? null,
      oldestAgeSeconds: ageSeconds(now, p.oldest_parked_at),
      oldest: p.oldest.map((t) => ({ ...t, ageSeconds: ageSeconds(now, t.parkedAt) })),
    })),
    unknownOutcomes: r.unknown.map((u) => ({ callId: u.call_id, caseId: u.case_id, taskId: u.task_id, operation: u.operation, status: u.status, createdAt: u.created_at.toISOString(), ageSeconds: ageSeconds(now, u.created_at) })),
    deadLetters: r.deadLetters,
    refusals: r.refusals.map((x) => ({ seq: x.seq, consumer: x.consumer, messageId: x.message_id, type: x.type, reason: x.reason, detail: x.detail, recordedAt: x.recorded_at.toISOString() })),
    restoreFailures: r.restore.map((f) => ({ taskId: f.task_id, caseId: f.case_id, reason: f.reason, error: f.error, parkedAt: f.parked_at?.toISOString() ?? null, ageSeconds: ageSeconds(now, f.parked_at) })),
  };
}

// ------------------------------------------------------------------------------- routes

interface ExceptionsOptions {
  readonly store: Store;
  /** Absent (no broker URL): dead letters are reported unavailable and replay answers 503. */
  readonly broker?: DeadLetterBroker | undefined;
}

function requireOperator(principal: Principal, res: ServerResponse, what: string): boolean {
  if (principal.roles.includes(EXCEPTIONS_ROLE)) return true;
  sendError(res, 403, 'forbidden', `${what} needs the role ${EXCEPTIONS_ROLE}`);
  return false;
}

/** Whether the principal may see a broker message: its case's customer, or unrestricted. */
async function mayReplay(store: Store, principal: Principal, d: DeadLetter): Promise<boolean> {
  if (principal.customers === null) return true;
  if (d.caseId === null || !isUuid(d.caseId)) return false;
  const customer = (await customersOfCases(store.db, [d.caseId])).get(d.caseId);
  return customer !== undefined && seesCustomer(principal, customer);
}

export async function exceptionsRoute(o: ExceptionsOptions, principal: Principal, res: ServerResponse): Promise<void> {
  if (!requireOperator(principal, res, 'the exceptions view')) return;
  const customers = principal.customers;
  const [parked, unknown, restore, refusals] = await Promise.all([
    loadParkedByClass(o.store.db, customers),
    loadUnknownOutcomes(o.store.db, customers, STALE_INTENT_MS),
    loadRestoreFailures(o.store.db, customers),
    // The dead_letters table names consumers and message ids, no case: unrestricted operators only.
    customers === null ? loadRecordedRefusals(o.store.db) : Promise.resolve([]),
  ]);
  let deadLetters: { available: boolean; error?: string; queues: { queue: string; messages: number }[]; messages: DeadLetter[] } = { available: false, error: 'no broker configured', queues: [], messages: [] };
  if (o.broker) {
    try {
      const peeked = await o.broker.peek();
      const owners = await customersOfCases(o.store.db, [...new Set(peeked.messages.flatMap((m) => (m.caseId !== null && isUuid(m.caseId) ? [m.caseId] : [])))]);
      const visible = peeked.messages.filter((m) => customers === null || (m.caseId !== null && owners.has(m.caseId) && seesCustomer(principal, owners.get(m.caseId)!)));
      deadLetters = { available: true, queues: customers === null ? peeked.queues : [], messages: visible };
    } catch (err) {
      deadLetters = { available: false, error: `the broker is unavailable: ${describeError(err)}`, queues: [], messages: [] };
    }
  }
  sendJson(res, 200, exceptionsView(new Date(), { parked, unknown, restore, refusals, deadLetters }));
}

export async function replayRoute(o: ExceptionsOptions, principal: Principal, id: string, res: ServerResponse): Promise<void> {
  if (!requireOperator(principal, res, 'replaying a dead letter')) return;
  if (!/^[\x21-\x7e]{1,200}$/.test(id)) return sendError(res, 404, 'dead_letter_not_found', 'no such dead letter');
  if (!o.broker) return sendError(res, 503, 'broker_unavailable', 'intake has no broker URL; dead letters cannot be replayed here');
  let d: DeadLetter;
  try {
    d = await o.broker.replay(id, (x) => mayReplay(o.store, principal, x));
  } catch (err) {
    if (err instanceof ReplayRefused) return sendError(res, err.error === 'dead_letter_not_found' ? 404 : err.error === 'replay_refused' ? 409 : 503, err.error, err.message);
    throw err;
  }
  // The audit trail of a replay is the case's own ledger (when the message names a known case).
  if (d.caseId !== null && isUuid(d.caseId) && (await customersOfCases(o.store.db, [d.caseId])).has(d.caseId)) {
    await o.store.unitOfWork((uow) => uow.appendLedger(d.caseId!, { kind: 'dead_letter_replayed', body: { messageId: d.id, type: d.type, from: d.queue, to: d.originalQueue, replayedBy: principal.id, service: INTAKE_SERVICE } }));
  }
  sendJson(res, 200, { replayed: true, deadLetter: d });
}
