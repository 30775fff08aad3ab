/**
 * Queue depths without the management plugin: a passive queue declare (`checkQueue`) per
 * service queue of the topology answers its ready-message and consumer counts. Each check uses
 * its own channel, because a missing queue closes the channel it was checked on.
 */
import amqplib from 'amqplib';
import { brokerUrls } from '@everdict/bus';
import type { Topology } from '@everdict/bus';
import type { QueueDepth } from './api.js';

export function queueDepthProbe(amqpUrl: string, topology: Topology): { depths: () => Promise<QueueDepth[]>; close: () => Promise<void> } {
  let conn: Promise<amqplib.ChannelModel> | undefined;
  const connection = (): Promise<amqplib.ChannelModel> => {
    conn ??= connectFirst(brokerUrls(amqpUrl)).then(
      (c) => {
        c.on('error', () => undefined);
        c.on('close', () => {
          conn = undefined;
        });
        return c;
      },
      (err: unknown) => {
        conn = undefined;
        throw err;
      },
    );
    return conn;
  };
  return {
    async depths() {
      const c = await connection();
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
    async close() {
      if (conn) await (await conn).close().catch(() => undefined);
    },
  };
}

/** The first node of AMQP_URL's list that accepts a connection (the list is one cluster). */
async function connectFirst(urls: readonly string[]): Promise<amqplib.ChannelModel> {
  let last: unknown;
  for (const url of urls) {
    try {
      return await amqplib.connect(url);
    } catch (err) {
      last = err;
    }
  }
  throw last;
}
