/**
 * One plain amqplib connection for intake's operator reads (queue depths, dead letters), opened
 * on first use to the first node of AMQP_URL's list that accepts (the list is one cluster).
 * A connection that closes or fails to open is forgotten, so the next use opens a fresh one.
 */
import amqplib from 'amqplib';
import { brokerUrls } from '@everdict/bus';

export interface LazyBrokerConnection {
  /** The open connection, opening it if there is none. */
  get(): Promise<amqplib.ChannelModel>;
  /** Closes the connection if one was opened; never throws. */
  close(): Promise<void>;
}

export function lazyBrokerConnection(amqpUrl: string): LazyBrokerConnection {
  let conn: Promise<amqplib.ChannelModel> | undefined;
  return {
    get() {
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
    },
    async close() {
      if (conn) await (await conn).close().catch(() => undefined);
    },
  };
}

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
