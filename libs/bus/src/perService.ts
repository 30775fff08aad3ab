/**
 * The transport of a node whose services each have their own broker user: one AMQP connection
 * per service, logged in as that service. A service consumes its queue over its own connection,
 * and every outbox row is published over the connection of the service that enqueued it, so the
 * broker-validated `user_id` of each message is its producer's — one service's credentials never
 * carry another's messages. A row whose producer this node holds no credentials for is refused
 * here (the relay claims only rows of its own producers, so this is a bug guard, not a path).
 */
import { EverdictError } from '@everdict/contracts';
import type { AmqpTransport } from './amqp.js';
import { connectAmqp } from './amqp.js';
import type { BrokerIdentity } from './identity.js';
import type { BusLogger } from './logger.js';
import type { Topology } from './topology.js';
import type { DeliveryProcessor, OutboundMessage, SubscribeOptions, Subscription, Transport } from './transport.js';

export class PerServiceTransport implements Transport {
  readonly kind = 'amqp' as const;
  readonly needsProducer = true;

  constructor(
    readonly topology: Topology,
    readonly identity: BrokerIdentity,
    private readonly byService: ReadonlyMap<string, AmqpTransport>,
  ) {}

  /** The services this node publishes and consumes as. */
  get services(): string[] {
    return [...this.byService.keys()];
  }

  publish(m: OutboundMessage): Promise<void> {
    const t = m.producer === undefined ? undefined : this.byService.get(m.producer);
    if (!t) {
      return Promise.reject(
        new EverdictError('producer_not_on_node', `message ${m.messageId} was enqueued by ${m.producer ?? 'an unknown producer'}, whose broker credentials this node does not hold`, {
          details: { field: 'sender.service', messageId: m.messageId },
        }),
      );
    }
    return t.publish(m);
  }

  subscribe(service: string, processor: DeliveryProcessor, opts: SubscribeOptions): Promise<Subscription> {
    const t = this.byService.get(service);
    if (!t) return Promise.reject(new EverdictError('config_invalid', `no broker credentials for ${service} on this node`, { details: { field: 'EVERDICT_AMQP_USERS' } }));
    return t.subscribe(service, processor, opts);
  }

  isReady(): boolean {
    return [...this.byService.values()].every((t) => t.isReady());
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.byService.values()].map((t) => t.close()));
  }
}

interface PerServiceOptions {
  readonly topology: Topology;
  readonly identity: BrokerIdentity;
  /** Service → broker URL logged in as that service's user. */
  readonly urls: Readonly<Record<string, string>>;
  /** Connection names are `<connectionName>-<service>`. */
  readonly connectionName: string;
  readonly connectTimeoutMs?: number;
  readonly logger?: BusLogger;
  /** TLS socket options for amqps:// URLs, shared by every service's connection. */
  readonly tls?: { readonly ca?: Buffer[]; readonly cert?: Buffer; readonly key?: Buffer };
}

/** Connects every service of the node as its own user; any failure closes what opened. */
export async function connectAmqpPerService(opts: PerServiceOptions): Promise<PerServiceTransport> {
  const opened = new Map<string, AmqpTransport>();
  try {
    for (const [service, url] of Object.entries(opts.urls)) {
      const t = await connectAmqp({
        url,
        topology: opts.topology,
        identity: opts.identity,
        asService: service,
        connectionName: `${opts.connectionName}-${service}`,
        ...(opts.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: opts.connectTimeoutMs }),
        ...(opts.logger ? { logger: opts.logger } : {}),
        ...(opts.tls ? { tls: opts.tls } : {}),
      });
      opened.set(service, t);
    }
  } catch (err) {
    await Promise.allSettled([...opened.values()].map((t) => t.close()));
    throw err;
  }
  return new PerServiceTransport(opts.topology, opts.identity, opened);
}
