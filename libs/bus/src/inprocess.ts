/**
 * The in-process transport for the embedded mode (DESIGN §7): no broker, the same topology, the
 * same inbox consumer, the same dedup and the same delivery limit.
 *
 * It mimics the broker where the consumer can tell: messages are routed by the bindings of
 * definitions.json (topic `*`/`#` matching), each queue delivers to its subscribers with at most
 * `prefetch` unsettled per subscriber, a requeued message comes back with its delivery count
 * raised, and past the queue's `x-delivery-limit` — or when rejected — it is dead-lettered via
 * the queue's dead-letter exchange and routing key into `<prefix>.<service>.dead`.
 *
 * Confirms: memory is not durable, so a publish to a queue that has subscribers is confirmed
 * only once they have SETTLED the message (acked, or dead-lettered). The relay marks the outbox
 * row published after that, so a process that dies with messages in memory republishes them
 * from the outbox on restart, and the inbox makes that harmless. A queue with no subscriber
 * holds the message and confirms at once (as a broker queue would), so a missing service never
 * stalls the relay; embedded mode subscribes every service before it starts the relay.
 */
import { EverdictError } from '@everdict/contracts';
import type { BrokerIdentity } from './identity.js';
import { IN_PROCESS_IDENTITY } from './identity.js';
import type { Topology } from './topology.js';
import { deliveryLimit, eventsExchange, route, serviceQueue } from './topology.js';
import type { Delivery, DeliveryProcessor, OutboundMessage, SubscribeOptions, Subscription, Transport } from './transport.js';

/** A message sitting in an in-process queue, or dead-lettered out of one. */
interface HeldMessage {
  readonly messageId: string;
  readonly type: string;
  readonly body: Buffer;
  /** The service that enqueued it (the composing process's record of the producer). */
  readonly userId: string | undefined;
  deliveryCount: number;
  /** Why it was dead-lettered into this queue ('rejected' | 'delivery_limit'), if it was. */
  deathReason?: 'rejected' | 'delivery_limit';
  /** The queue it was dead-lettered from, if it was. */
  deadFrom?: string;
  confirm?: { resolve: () => void; reject: (err: Error) => void };
}

interface Subscriber {
  readonly processor: DeliveryProcessor;
  readonly prefetch: number;
  readonly inflight: Set<Promise<void>>;
  stopping: boolean;
}

interface QueueState {
  readonly name: string;
  readonly deliveryLimit: number | undefined;
  readonly deadLetterExchange: string | undefined;
  readonly deadLetterKey: string;
  readonly messages: HeldMessage[];
  readonly subscribers: Subscriber[];
  next: number;
}

export class InProcessTransport implements Transport {
  readonly kind = 'in_process' as const;
  /** Each service is its own user; the relay hands in the producer of every row. */
  readonly identity: BrokerIdentity = IN_PROCESS_IDENTITY;
  readonly needsProducer = true;
  private readonly queues = new Map<string, QueueState>();
  private closed = false;

  constructor(readonly topology: Topology) {
    for (const q of topology.queues) {
      const limit = q.arguments['x-delivery-limit'];
      const dlx = q.arguments['x-dead-letter-exchange'];
      this.queues.set(q.name, {
        name: q.name,
        deliveryLimit: typeof limit === 'number' ? limit : undefined,
        deadLetterExchange: typeof dlx === 'string' ? dlx : undefined,
        deadLetterKey: String(q.arguments['x-dead-letter-routing-key'] ?? ''),
        messages: [],
        subscribers: [],
        next: 0,
      });
    }
  }

  isReady(): boolean {
    return !this.closed;
  }

  publish(m: OutboundMessage): Promise<void> {
    if (this.closed) return Promise.reject(new EverdictError('transport_closed', 'in-process transport is closed', { retryable: true }));
    const targets = route(this.topology, eventsExchange(this.topology), m.routingKey).map((name) => this.queues.get(name)!);
    const confirms = targets.map((q) => {
      const held: HeldMessage = { messageId: m.messageId, type: m.type, body: Buffer.from(m.body), userId: m.producer, deliveryCount: 0 };
      const confirmed = q.subscribers.length > 0 ? new Promise<void>((resolve, reject) => (held.confirm = { resolve, reject })) : Promise.resolve();
      q.messages.push(held);
      this.pump(q);
      return confirmed;
    });
    return Promise.all(confirms).then(() => undefined);
  }

  async subscribe(service: string, processor: DeliveryProcessor, opts: SubscribeOptions): Promise<Subscription> {
    const q = this.queues.get(serviceQueue(this.topology, service).name)!;
    // Validates the limit the consumer will rely on, exactly as the AMQP path does.
    deliveryLimit(this.topology, service);
    const sub: Subscriber = { processor, prefetch: Math.max(1, opts.prefetch), inflight: new Set(), stopping: false };
    q.subscribers.push(sub);
    this.pump(q);
    let stopped: Promise<void> | undefined;
    return {
      stop: () => {
        stopped ??= (async () => {
          sub.stopping = true;
          while (sub.inflight.size > 0) await Promise.allSettled([...sub.inflight]);
          q.subscribers.splice(q.subscribers.indexOf(sub), 1);
        })();
        return stopped;
      },
    };
  }

  /** Messages waiting in a queue (e.g. `<prefix>.<service>.dead`), oldest first. */
  held(queue: string): readonly HeldMessage[] {
    return [...(this.queues.get(queue)?.messages ?? [])];
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const q of this.queues.values()) {
      for (const s of [...q.subscribers]) s.stopping = true;
      await Promise.allSettled(q.subscribers.flatMap((s) => [...s.inflight]));
      for (const m of q.messages) m.confirm?.reject(new EverdictError('transport_closed', 'in-process transport closed before the message was settled', { retryable: true }));
    }
  }

  private pump(q: QueueState): void {
    while (q.messages.length > 0) {
      const sub = this.pickSubscriber(q);
      if (!sub) return;
      const msg = q.messages.shift()!;
      const delivery: Delivery = { body: msg.body, messageId: msg.messageId, deliveryCount: msg.deliveryCount, redelivered: msg.deliveryCount > 0, userId: msg.userId };
      const run = sub
        .processor(delivery)
        .catch((): 'requeue' => 'requeue')
        .then((settlement) => {
          sub.inflight.delete(run);
          this.settle(q, msg, settlement);
          this.pump(q);
        });
      sub.inflight.add(run);
    }
  }

  /** Round-robin over subscribers that have room. */
  private pickSubscriber(q: QueueState): Subscriber | undefined {
    for (let i = 0; i < q.subscribers.length; i++) {
      const s = q.subscribers[(q.next + i) % q.subscribers.length]!;
      if (!s.stopping && s.inflight.size < s.prefetch) {
        q.next = (q.next + i + 1) % q.subscribers.length;
        return s;
      }
    }
    return undefined;
  }

  private settle(q: QueueState, msg: HeldMessage, settlement: 'ack' | 'requeue' | 'dead_letter'): void {
    if (settlement === 'ack') {
      msg.confirm?.resolve();
      return;
    }
    if (settlement === 'requeue') {
      msg.deliveryCount++;
      if (q.deliveryLimit === undefined || msg.deliveryCount <= q.deliveryLimit) {
        q.messages.push(msg);
        return;
      }
    }
    this.deadLetter(q, msg, settlement === 'requeue' ? 'delivery_limit' : 'rejected');
    msg.confirm?.resolve();
  }

  private deadLetter(from: QueueState, msg: HeldMessage, reason: 'rejected' | 'delivery_limit'): void {
    if (from.deadLetterExchange === undefined) return; // no DLX: the message is dropped, as on the broker
    for (const name of route(this.topology, from.deadLetterExchange, from.deadLetterKey)) {
      const target = this.queues.get(name)!;
      target.messages.push({ messageId: msg.messageId, type: msg.type, body: msg.body, userId: msg.userId, deliveryCount: 0, deathReason: reason, deadFrom: from.name });
      this.pump(target);
    }
  }
}
