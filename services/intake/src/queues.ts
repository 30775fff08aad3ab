/**
 * Queue depths without the management plugin: a passive queue declare (`checkQueue`) per
 * service queue of the topology answers its ready-message and consumer counts. Each check uses
 * its own channel, because a missing queue closes the channel it was checked on.
 */
import type { Topology } from '@everdict/bus';
import type { QueueDepth } from './api.js';
import { lazyBrokerConnection } from './brokerConnection.js';

export function queueDepthProbe(amqpUrl: string, topology: Topology): { depths: () => Promise<QueueDepth[]>; close: () => Promise<void> } {
  const broker = lazyBrokerConnection(amqpUrl);
  return {
    async depths() {
      const c = await broker.get();
      const out: QueueDepth[] = [];
      for (const q of topology.queues) {
        const ch = await c.createChannel();
        ch.on('error', () => undefined);
        try {
          const ok = await ch.checkQueue(q.name);
          out.push({ queue: q.name, messages: ok.messageCount, consumers: ok.consumerCount });
          await ch.close();
        } catch {
          out.push({ queue: q.name, messages: -1, consumers: -1 });
        }
      }
      return out;
    },
    close: () => broker.close(),
  };
}
