/**
 * RabbitMQ transport over amqp-connection-manager: one connection with heartbeats and automatic
 * reconnect, a CONFIRM channel for publishing, one channel per subscription for consuming.
 *
 * Invariants:
 * - `url` may list several nodes of one cluster (comma-separated); a lost connection reconnects
 *   to the next node in the list. Queues are quorum queues replicated across the cluster, so any
 *   node serves every queue and confirms only what a majority has on disk.
 * - Every channel asserts the full topology from definitions.json before it is used, on first
 *   connect and on every reconnect, so no channel ever consumes or publishes into a missing or
 *   drifted queue.
 * - `publish` resolves only after the broker confirmed the message (persistent, so on a quorum
 *   queue it is replicated and on disk). A nack, the loss of the channel before the confirm, a
 *   publish timeout or `close()` rejects it at once — the broker may or may not have the message,
 *   so the caller (the relay) publishes it again: a duplicate downstream is possible, a loss is
 *   not. Publishes are written straight to the confirm channel of the moment; amqplib reports
 *   nothing for confirms outstanding on a dead connection, so we track and fail them ourselves.
 * - A delivery is acked or nacked on the very channel it arrived on. If that channel has died
 *   meanwhile the settlement is dropped: the broker has already returned the message to the
 *   queue, and the inbox turns the redelivery into a duplicate. Acking a stale delivery tag on a
 *   new channel would be a channel error, so it is never attempted.
 */
import amqp from 'amqp-connection-manager';
import type { AmqpConnectionManager, ChannelWrapper } from 'amqp-connection-manager';
import type { Channel, ConfirmChannel, ConsumeMessage } from 'amqplib';
import { EverdictError, jitteredBackoffMs } from '@everdict/contracts';
import type { BusLogger } from './logger.js';
import { describeError, noopBusLogger } from './logger.js';
import type { Topology } from './topology.js';
import type { BrokerIdentity } from './identity.js';
import { sharedIdentity } from './identity.js';
import { assertTopology, assertTopologyFor, eventsExchange, serviceQueue } from './topology.js';
import type { Delivery, DeliveryProcessor, OutboundMessage, SubscribeOptions, Subscription, Transport } from './transport.js';

interface AmqpTransportOptions {
  /**
   * Broker URL, e.g. amqp://guest:guest@127.0.0.1:5672, or a comma-separated list of the nodes
   * of one cluster: each (re)connect tries them in turn, so losing a node moves the connection
   * to the next one.
   */
  readonly url: string;
  readonly topology: Topology;
  /** Shown as `connection_name` in `rabbitmqctl list_connections` (default "everdict"). */
  readonly connectionName?: string;
  /** Heartbeat interval in seconds (default 5). */
  readonly heartbeatSeconds?: number;
  /** Wait before a reconnect attempt, in seconds (default 1). */
  readonly reconnectSeconds?: number;
  /** A publish not confirmed within this many ms rejects (default 30000). */
  readonly publishTimeoutMs?: number;
  /** How long `connectAmqp` waits for the first connection and topology (default 10000 ms). */
  readonly connectTimeoutMs?: number;
  readonly logger?: BusLogger;
  /**
   * TLS socket options for amqps:// URLs (CA bundle, client certificate and key, as PEM), handed
   * to amqplib's `tls.connect`. Unset: the system CAs, no client certificate.
   */
  readonly tls?: { readonly ca?: Buffer[]; readonly cert?: Buffer; readonly key?: Buffer };
  /**
   * Who speaks for which service (default: shared, the URL's user speaks for every service).
   * Consumers on this transport authenticate every delivery against it.
   */
  readonly identity?: BrokerIdentity;
  /**
   * The service this connection's user is (per-service broker users): it then declares only that
   * service's queues and checks the rest passively (see assertTopologyFor). Unset: the whole
   * topology is declared, which needs configure permission on all of it.
   */
  readonly asService?: string;
}

class BrokerUnavailable extends EverdictError {
  constructor(message: string, cause?: unknown) {
    super('broker_unavailable', message, { retryable: true, cause });
  }
}

class PublishFailed extends EverdictError {
  constructor(messageId: string, cause: unknown) {
    super('publish_failed', `broker did not confirm message ${messageId}: ${describeError(cause)}`, { retryable: true, cause, details: { messageId } });
  }
}

/**
 * The login of a broker URL (the first node's): what the broker checks `user_id` against.
 * amqplib logs in as guest when the URL names no user.
 */
export function brokerUser(url: string): string {
  const first = brokerUrls(url)[0]!;
  try {
    const user = decodeURIComponent(new URL(first).username);
    return user.length > 0 ? user : 'guest';
  } catch {
    throw new BrokerUnavailable('the broker URL is not a valid amqp:// or amqps:// URL');
  }
}

/**
 * The broker URLs in `url` (comma-separated; blanks dropped). amqp-connection-manager walks the
 * list round-robin on every reconnect, so a dead node costs one failed attempt, not the fleet.
 */
export function brokerUrls(url: string): string[] {
  const urls = url.split(',').map((u) => u.trim()).filter((u) => u.length > 0);
  if (urls.length === 0) throw new BrokerUnavailable('no broker URL given');
  return urls;
}

/** Connects, asserts the topology, and returns a ready transport (or throws BrokerUnavailable / TopologyError). */
export async function connectAmqp(opts: AmqpTransportOptions): Promise<AmqpTransport> {
  const transport = new AmqpTransport(opts);
  try {
    await transport.ready(opts.connectTimeoutMs ?? 10_000);
  } catch (err) {
    await transport.close().catch(() => {});
    throw err;
  }
  return transport;
}

export class AmqpTransport implements Transport {
  readonly kind = 'amqp' as const;
  readonly topology: Topology;
  readonly identity: BrokerIdentity;
  readonly needsProducer = false;
  /** The connection's login, stamped as `user_id` on every publish (the broker refuses a mismatch). */
  readonly user: string;
  private readonly manager: AmqpConnectionManager;
  private readonly publisher: ChannelWrapper;
  private readonly logger: BusLogger;
  private readonly exchange: string;
  private readonly subscriptions = new Set<AmqpSubscription>();
  private setupError: unknown;
  private closing = false;
  private pub: PublisherChannel | undefined;
  private readonly connectWaiters: (() => void)[] = [];
  private readonly assert: (ch: Channel) => Promise<void>;

  constructor(private readonly opts: AmqpTransportOptions) {
    this.topology = opts.topology;
    this.exchange = eventsExchange(opts.topology);
    this.logger = opts.logger ?? noopBusLogger;
    this.user = brokerUser(opts.url);
    this.identity = opts.identity ?? sharedIdentity(this.user);
    const asService = opts.asService;
    this.assert = (ch: Channel) => (asService === undefined ? assertTopology(ch, this.topology) : assertTopologyFor(ch, this.topology, asService));
    const heartbeat = opts.heartbeatSeconds ?? 5;
    this.manager = amqp.connect(brokerUrls(opts.url), {
      heartbeatIntervalInSeconds: heartbeat,
      reconnectTimeInSeconds: opts.reconnectSeconds ?? 1,
      connectionOptions: { ...opts.tls, clientProperties: { connection_name: opts.connectionName ?? 'everdict' } },
    });
    this.manager.on('connect', () => this.logger.info({ connection: opts.connectionName }, 'broker connected'));
    // The manager emits these synchronously before it waits `reconnectTimeInSeconds`: each wait is
    // drawn afresh with the fleet's jitter, so processes a broker restart disconnected together
    // do not reconnect together.
    const reconnectMs = (opts.reconnectSeconds ?? 1) * 1000;
    const jitterNextWait = () => void (this.manager.reconnectTimeInSeconds = jitteredBackoffMs(reconnectMs) / 1000);
    this.manager.on('disconnect', ({ err }) => {
      jitterNextWait();
      if (!this.closing) this.logger.warn({ connection: opts.connectionName, err: describeError(err) }, 'broker disconnected; reconnecting');
    });
    this.manager.on('connectFailed', ({ err }) => {
      jitterNextWait();
      this.logger.warn({ connection: opts.connectionName, err: describeError(err) }, 'broker connect failed; retrying');
    });
    this.publisher = this.manager.createChannel({
      name: 'publisher',
      confirm: true,
      setup: async (ch: ConfirmChannel) => {
        this.guardChannel(ch, 'publisher');
        try {
          await this.assert(ch);
          this.setupError = undefined;
        } catch (err) {
          this.setupError = err;
          throw err;
        }
        this.attachPublisher(ch);
      },
    });
    this.publisher.on('error', (err: unknown) => this.logger.error({ channel: 'publisher', err: describeError(err) }, 'publisher channel setup failed'));
  }

  /** Makes `ch` the channel publishes go to; confirms still outstanding when it closes fail. */
  private attachPublisher(ch: ConfirmChannel): void {
    const state: PublisherChannel = { ch, pending: new Set(), blocked: false, drained: [] };
    ch.on('close', () => {
      if (this.pub === state) this.pub = undefined;
      for (const fail of [...state.pending]) fail(new Error('channel closed before the broker confirmed'));
      for (const go of state.drained.splice(0)) go();
    });
    ch.on('drain', () => {
      state.blocked = false;
      for (const go of state.drained.splice(0)) go();
    });
    this.pub = state;
    for (const go of this.connectWaiters.splice(0)) go();
  }

  /** Resolves once connected with the topology asserted; rejects on timeout or a topology mismatch. */
  async ready(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    let onError: ((err: unknown) => void) | undefined;
    const failed = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new BrokerUnavailable(`no broker connection within ${timeoutMs} ms`, this.setupError)), timeoutMs);
      // A topology assertion the broker refuses (drift) fails the start at once.
      onError = (err: unknown) => reject(err);
      this.publisher.on('error', onError);
    });
    try {
      await Promise.race([this.publisher.waitForConnect(), failed]);
    } finally {
      clearTimeout(timer);
      if (onError) this.publisher.removeListener('error', onError);
    }
    if (this.setupError !== undefined) throw this.setupError;
  }

  isReady(): boolean {
    return !this.closing && this.setupError === undefined && this.pub !== undefined && this.manager.isConnected();
  }

  async publish(m: OutboundMessage): Promise<void> {
    const timeoutMs = this.opts.publishTimeoutMs ?? 30_000;
    const deadline = performance.now() + timeoutMs;
    let state = this.pub;
    // Between connections, or while the socket is full, wait (bounded) for a writable channel.
    while (!state || state.blocked) {
      if (this.closing) throw new PublishFailed(m.messageId, new Error('transport closed'));
      const left = deadline - performance.now();
      if (left <= 0) throw new PublishFailed(m.messageId, new Error(`no writable channel within ${timeoutMs} ms`));
      await new Promise<void>((resolve) => {
        const timer = setTimeout(go, left);
        function go() {
          clearTimeout(timer);
          resolve();
        }
        if (state?.blocked) state.drained.push(go);
        else this.connectWaiters.push(go);
      });
      state = this.pub;
    }
    const channel = state;
    await new Promise<void>((resolve, reject) => {
      let settled = false;
      const finish = (err?: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        channel.pending.delete(fail);
        if (err === undefined || err === null) resolve();
        else reject(new PublishFailed(m.messageId, err));
      };
      const fail = (err: Error) => finish(err);
      const timer = setTimeout(() => finish(new Error(`not confirmed within ${timeoutMs} ms`)), Math.max(1, deadline - performance.now()));
      channel.pending.add(fail);
      try {
        const writable = channel.ch.publish(
          this.exchange,
          m.routingKey,
          m.body,
          // The W3C trace context travels as the `traceparent` header (the AMQP binding of Trace Context).
          { persistent: true, messageId: m.messageId, type: m.type, contentType: 'application/json', userId: this.user, ...(m.traceparent ? { headers: { traceparent: m.traceparent } } : {}) },
          (err: unknown) => finish(err ?? undefined),
        );
        if (!writable) channel.blocked = true;
      } catch (err) {
        finish(err);
      }
    });
  }

  async subscribe(service: string, processor: DeliveryProcessor, opts: SubscribeOptions): Promise<Subscription> {
    const queue = serviceQueue(this.topology, service).name;
    const sub = new AmqpSubscription(this.manager, this.assert, queue, processor, opts, this.logger, (ch, what) => this.guardChannel(ch, what));
    this.subscriptions.add(sub);
    sub.onStopped = () => this.subscriptions.delete(sub);
    await sub.start();
    return sub;
  }

  /** Publishes written to the broker and not yet confirmed. */
  unconfirmed(): number {
    return this.pub?.pending.size ?? 0;
  }

  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    await Promise.allSettled([...this.subscriptions].map((s) => s.stop()));
    for (const go of this.connectWaiters.splice(0)) go();
    await this.publisher.close().catch(() => {});
    await this.manager.close().catch(() => {});
  }

  /**
   * A channel-level error (not a connection loss) leaves the channel wrapper without a channel
   * until the next reconnect, so force one; the channel comes back with its topology asserted.
   */
  private guardChannel(ch: Channel, what: string): void {
    ch.on('error', (err: unknown) => {
      if (this.closing) return;
      this.logger.error({ channel: what, err: describeError(err) }, 'channel error; forcing a reconnect');
      setTimeout(() => {
        if (!this.closing) this.manager.reconnect();
      }, 100).unref();
    });
  }
}

interface PublisherChannel {
  readonly ch: ConfirmChannel;
  /** Fails each publish written on this channel and not yet confirmed. */
  readonly pending: Set<(err: Error) => void>;
  /** The socket buffer is full: wait for 'drain' before writing more. */
  blocked: boolean;
  readonly drained: (() => void)[];
}

function toDelivery(msg: ConsumeMessage): Delivery {
  const count = msg.properties.headers?.['x-delivery-count'];
  return {
    body: msg.content,
    messageId: typeof msg.properties.messageId === 'string' ? msg.properties.messageId : undefined,
    deliveryCount: typeof count === 'number' && count > 0 ? count : 0,
    redelivered: msg.fields.redelivered,
    userId: typeof msg.properties.userId === 'string' ? msg.properties.userId : undefined,
    traceparent: typeof msg.properties.headers?.['traceparent'] === 'string' ? (msg.properties.headers['traceparent'] as string) : undefined,
  };
}

class AmqpSubscription implements Subscription {
  onStopped: () => void = () => {};
  private readonly wrapper: ChannelWrapper;
  private current: { ch: Channel; consumerTag: string } | undefined;
  private readonly inflight = new Set<Promise<void>>();
  private stopping = false;
  private stopped: Promise<void> | undefined;

  constructor(
    manager: AmqpConnectionManager,
    assert: (ch: Channel) => Promise<void>,
    private readonly queue: string,
    private readonly processor: DeliveryProcessor,
    opts: SubscribeOptions,
    private readonly logger: BusLogger,
    guard: (ch: Channel, what: string) => void,
  ) {
    this.wrapper = manager.createChannel({
      name: `consume:${queue}`,
      confirm: false,
      setup: async (ch: Channel) => {
        if (this.stopping) return;
        guard(ch, `consume:${queue}`);
        let alive = true;
        ch.on('close', () => {
          alive = false;
        });
        await assert(ch);
        await ch.prefetch(opts.prefetch);
        const { consumerTag } = await ch.consume(queue, (msg) => {
          // null: the broker cancelled us (queue deleted); the next reconnect re-subscribes.
          if (msg) this.track(this.handle(ch, () => alive, msg));
        });
        this.current = { ch, consumerTag };
      },
    });
    this.wrapper.on('error', (err: unknown) => this.logger.error({ queue, err: describeError(err) }, 'consumer channel setup failed'));
  }

  async start(): Promise<void> {
    await this.wrapper.waitForConnect();
  }

  private track(p: Promise<void>): void {
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p));
  }

  private async handle(ch: Channel, alive: () => boolean, msg: ConsumeMessage): Promise<void> {
    const settlement = await this.processor(toDelivery(msg));
    if (!alive()) return; // the broker returned it to the queue when the channel died
    try {
      if (settlement === 'ack') ch.ack(msg);
      else ch.nack(msg, false, settlement === 'requeue');
    } catch (err) {
      this.logger.warn({ queue: this.queue, err: describeError(err) }, 'settlement dropped: channel closed');
    }
  }

  stop(): Promise<void> {
    this.stopped ??= this.drain();
    return this.stopped;
  }

  private async drain(): Promise<void> {
    this.stopping = true;
    const cur = this.current;
    if (cur) {
      // After cancel-ok no new delivery arrives; any delivered before it is already in `inflight`.
      await cur.ch.cancel(cur.consumerTag).catch(() => {});
    }
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
    await this.wrapper.close().catch(() => {});
    this.onStopped();
  }
}
