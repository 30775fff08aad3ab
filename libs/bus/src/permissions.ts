/**
 * The broker permissions of each service's own user (pure, from the topology and the producer
 * table), as RabbitMQ regular expressions. infra/rabbitmq/users.json carries exactly these
 * (a unit test keeps it so), and the testkit grants them to per-test users.
 *
 * - configure: only the service's own queue and dead-letter queue (declared by the service; the
 *   exchanges and other queues come from the operator's definitions import and are checked
 *   passively, which needs no permission).
 * - write: the events exchange (to publish) and its own queues (to bind them).
 * - read: its own queues (to consume) and the exchanges they are bound from (to bind).
 * - topic write on the events exchange: exactly the routing keys (message types) it emits;
 *   topic read: exactly the types bound to its queue.
 * A service with no queue (intake) configures and reads nothing.
 */
import { emitPattern } from '@everdict/contracts';
import type { Topology } from './topology.js';
import { boundTypes, consumingServices, eventsExchange } from './topology.js';

export interface ServicePermissions {
  readonly configure: string;
  readonly write: string;
  readonly read: string;
  /** Topic permission on the events exchange. */
  readonly topic: { readonly exchange: string; readonly write: string; readonly read: string };
}

const esc = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const anyOf = (names: readonly string[]): string => (names.length === 0 ? '^$' : `^(${names.map(esc).join('|')})$`);

export function servicePermissions(t: Topology, service: string): ServicePermissions {
  const events = eventsExchange(t);
  const consumes = consumingServices(t).includes(service);
  const own = consumes ? [`${t.prefix}.${service}`, `${t.prefix}.${service}.dead`] : [];
  const boundFrom = [...new Set(t.bindings.filter((b) => own.includes(b.destination)).map((b) => b.source))].sort();
  return {
    configure: anyOf(own),
    write: anyOf([events, ...own]),
    read: anyOf([...boundFrom, ...own]),
    topic: { exchange: events, write: emitPattern(service), read: consumes ? anyOf(boundTypes(t, service)) : '^$' },
  };
}
