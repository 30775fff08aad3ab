/**
 * A real pool wrapped to count what reaches the target: connections checked out and queries
 * sent. A refusal "before contact" is one that leaves both at zero.
 */
import type pg from 'pg';
import type { PgPoolPort } from '@everdict/connectors';

export interface CountedPool {
  readonly port: PgPoolPort;
  connects(): number;
  queries(): number;
}

export function countingPool(pool: pg.Pool): CountedPool {
  let connects = 0;
  let queries = 0;
  return {
    connects: () => connects,
    queries: () => queries,
    port: {
      async connect() {
        connects++;
        const client = await pool.connect();
        return {
          query: (text: string, values?: unknown[]) => {
            queries++;
            return client.query(text, values);
          },
          release: (destroy?: boolean) => client.release(destroy),
          on: (event: 'error', listener: (err: Error) => void) => client.on(event, listener),
          removeListener: (event: 'error', listener: (err: Error) => void) => client.removeListener(event, listener),
        };
      },
      end: () => pool.end(),
    },
  };
}
