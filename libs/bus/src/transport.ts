/**
 * The transport port. Services, the inbox consumer and the outbox relay see only this, so the
 * same handlers run on RabbitMQ (`AmqpTransport`) and in one process (`InProcessTransport`, the
 * embedded mode of DESIGN §7) with the same dedup, the same refusals and the same delivery limit.
 *
 * Contract both implementations keep:
 * - `publish` resolves only once the message is safe with the transport (a broker confirm, or
 *   in-process: settled by the consumers that were subscribed), and rejects otherwise; the relay
 *   marks an outbox row published only after it resolved.
 * - A delivery is settled exactly once: `ack` (done), `requeue` (redeliver; counts toward the
 *   queue's delivery limit, after which the message is dead-lettered) or `dead_letter`.
 * - Delivery order is not a guarantee: redeliveries and concurrent processing reorder messages.
 */
import { encodeEnvelope } from '@everdict/contracts';
import type { AnyEnvelope } from '@everdict/contracts';
import type { BrokerIdentity } from './identity.js';
import type { Topology } from './topology.js';

/** One committed outbox row on its way out: exact bytes plus routing facts. */
export interface OutboundMessage {
  /** The envelope id; published as the AMQP message-id. */
  readonly messageId: string;
  readonly type: string;
  /** Routing key on the events exchange (the message type unless the sender chose otherwise). */
  readonly routingKey: string;
  readonly body: Buffer;
  /**
   * The service that enqueued the row (its envelope's sender.service): the identity it is
   * published under. Required by transports whose identity is per service (`needsProducer`).
   */
  readonly producer?: string;
  /** W3C trace context of the publish (the relay's span), sent as the `traceparent` header. */
  readonly traceparent?: string | undefined;
}

export interface Delivery {
  readonly body: Buffer;
  /** The transport-level message id (AMQP `message-id` property), if the sender set one. */
  readonly messageId: string | undefined;
  /** Earlier deliveries of this message that were returned (0 on the first; `x-delivery-count`). */
  readonly deliveryCount: number;
  readonly redelivered: boolean;
  /** The producer's authenticated broker user (AMQP `user-id`, validated by the broker); undefined if unset. */
  readonly userId: string | undefined;
  /**
   * The `traceparent` header, if the publisher set one: the consumer's span continues it (else
   * the envelope's own traceparent). Trace context only — never trusted for anything else.
   */
  readonly traceparent?: string | undefined;
}

export type Settlement = 'ack' | 'requeue' | 'dead_letter';

/** Turns a delivery into its settlement. Must not throw: every failure maps to a settlement. */
export type DeliveryProcessor = (delivery: Delivery) => Promise<Settlement>;

export interface SubscribeOptions {
  /** Most unsettled deliveries at once (AMQP prefetch); also the processing concurrency. */
  readonly prefetch: number;
}

export interface Subscription {
  /**
   * Graceful stop: no new deliveries, wait for the in-flight ones to be processed and settled,
   * then release the channel. Resolves when nothing of this subscription is running.
   */
  stop(): Promise<void>;
}

export interface Transport {
  readonly kind: 'amqp' | 'in_process';
  readonly topology: Topology;
  /** Which user speaks for which service; the consumer authenticates every delivery with it. */
  readonly identity: BrokerIdentity;
  /** Whether `publish` needs `OutboundMessage.producer` (the relay then reads it from each row). */
  readonly needsProducer: boolean;
  /** Publishes to the events exchange; resolves after the transport confirmed the message. */
  publish(message: OutboundMessage): Promise<void>;
  /** Consumes the queue of `service` (`<prefix>.<service>`) with at most `prefetch` in flight. */
  subscribe(service: string, processor: DeliveryProcessor, opts: SubscribeOptions): Promise<Subscription>;
  /** Whether publishing and consuming can currently proceed (for /readyz). */
  isReady(): boolean;
  /** Closes the transport; unconfirmed publishes reject. Stop subscriptions first for a clean drain. */
  close(): Promise<void>;
}

/**
 * Publishes an envelope directly, routed by its type. Services do NOT use this — they enqueue in
 * their unit of work and let the relay publish — it is for tools and tests outside a transaction.
 */
export function publishEnvelope(transport: Transport, envelope: AnyEnvelope): Promise<void> {
  return transport.publish({ messageId: envelope.id, type: envelope.type, routingKey: envelope.type, body: encodeEnvelope(envelope), producer: envelope.sender.service, traceparent: envelope.traceparent });
}
