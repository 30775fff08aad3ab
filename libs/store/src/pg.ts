/**
 * The Db port over node-postgres. One pool per process; LISTEN uses its own client and
 * reconnects with backoff, because a relay that silently stops hearing NOTIFY would only be
 * rescued by its poll timer.
 */
import pg from 'pg';
import { jitteredBackoffMs } from '@everdict/contracts';
import type { Db, QueryResult, Queryable, SessionPrepared, Sql } from './db.js';
import { DatabaseUnavailable, translateDbError } from './errors.js';
import { BEGIN, COMMIT, pipelinable, runPipeline } from './pgPipeline.js';
import type { PipelineResult } from './pgPipeline.js';

// Return int8 (bigserial, counts) as JS numbers: every bigint we use stays far below 2^53.
pg.types.setTypeParser(20, (v) => Number(v));

interface PgDbOptions {
  /** Pool size (default 10). */
  max?: number;
  /** Application name shown in pg_stat_activity (default "everdict"). */
  applicationName?: string;
  /** Statement timeout in ms (default 30000); no query may hold a connection forever. */
  statementTimeoutMs?: number;
}

function asQueryable(client: pg.PoolClient | pg.Pool): Queryable {
  return {
    async query<R>(q: Sql): Promise<QueryResult<R>> {
      try {
        const res = await client.query({ text: q.text, values: q.values as unknown[] | undefined, name: q.name });
        return { rows: res.rows as R[], rowCount: res.rowCount ?? 0 };
      } catch (err) {
        throw translateDbError(err);
      }
    },
  };
}

/**
 * The session-prepared statements (Sql.sessionPrepared) each pooled connection holds. A client
 * object lives exactly as long as its connection, so a reconnect starts with none.
 */
const sessionStatements = new WeakMap<pg.PoolClient, Set<string>>();

/**
 * Prepares `s` on `client` unless it already holds it. Runs outside any transaction (a PREPARE
 * is session state, not part of a unit of work that may roll back); once per connection.
 */
async function prepareOnSession(client: pg.PoolClient, s: SessionPrepared): Promise<void> {
  let held = sessionStatements.get(client);
  if (held === undefined) sessionStatements.set(client, (held = new Set()));
  if (held.has(s.name)) return;
  try {
    await client.query(s.prepare);
  } catch (err) {
    throw translateDbError(err);
  }
  held.add(s.name);
}

/** The text to send for a parameterless statement: its EXECUTE where the session holds it. */
function sessionText(client: pg.PoolClient, q: Sql): string {
  const s = q.sessionPrepared;
  return s !== undefined && sessionStatements.get(client)?.has(s.name) === true ? s.execute : q.text;
}

/** The error of a COMMIT the server answered with ROLLBACK (an earlier statement had failed). */
const rolledBack = () => Object.assign(new Error('transaction was aborted by an earlier failed statement and rolled back'), { code: '25P02' });

export function createPgDb(connectionString: string, opts: PgDbOptions = {}): Db {
  const pool = new pg.Pool({
    connectionString,
    max: opts.max ?? 10,
    application_name: opts.applicationName ?? 'everdict',
    statement_timeout: opts.statementTimeoutMs ?? 30_000,
  });
  // An idle client losing its server must not crash the process; the next checkout reconnects.
  pool.on('error', () => {});
  const direct = asQueryable(pool);
  // Deferred-durability statements run on sessions of their own that commit with
  // `synchronous_commit = off`: one round trip per statement, where a transaction on the main
  // pool with SET LOCAL takes three (BEGIN + SET, the statement, COMMIT). Opened on first use;
  // three connections: as many as the group committer has statements in flight, and the
  // outbox relay's one (a relay's claim, mark and release run one after another).
  let deferredPool: pg.Pool | undefined;
  const deferred = (): Queryable => {
    if (deferredPool === undefined) {
      deferredPool = new pg.Pool({
        connectionString,
        max: 3,
        application_name: `${opts.applicationName ?? 'everdict'}-deferred`,
        statement_timeout: opts.statementTimeoutMs ?? 30_000,
        options: '-c synchronous_commit=off',
      });
      deferredPool.on('error', () => {});
    }
    return asQueryable(deferredPool);
  };
  const listeners = new Set<pg.Client>();
  let closed = false;

  return {
    query: (q) => direct.query(q),

    queryDeferred: (q) => deferred().query(q),

    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (err) {
        throw translateDbError(err);
      }
      // While checked out a pg client has no pool listener: a connection that dies (a Postgres
      // restart, `terminating connection due to administrator command`) emits 'error', which
      // unhandled would crash the process. It is caught here and the unit of work fails with
      // the retryable DatabaseUnavailable — at the statement in flight, the next one, or COMMIT.
      let lost: unknown;
      const onLost = (err: unknown) => {
        lost ??= err;
      };
      client.on('error', onLost);
      const gone = () => (lost === undefined ? undefined : new DatabaseUnavailable(lost));
      let broken = false;
      // BEGIN travels with the unit of work's first statement: in one simple-protocol query
      // when that statement is parameterless (on the inbox path, a dedup insert no statement
      // could carry: InboxCarrier), in one pipeline when this connection has parsed it
      // (pgPipeline.ts), as it does ahead of statements sent together (queryMany). Only a
      // first statement this connection has not parsed yet follows BEGIN in a round trip of
      // its own (the one that parses it).
      let begun = false;
      /** Set once commitWith's COMMIT succeeded: the transaction is over. */
      let committed = false;
      const ended = () => new Error('the unit of work has committed (commitWith): nothing more may run in it');
      const inner = asQueryable(client);
      const pipeline = async (sqls: readonly Sql[]): Promise<PipelineResult[]> => {
        try {
          return await runPipeline(client, sqls);
        } catch (err) {
          throw translateDbError(err);
        }
      };
      const tx: Queryable = {
        async query<R>(q: Sql): Promise<QueryResult<R>> {
          if (committed) throw ended();
          const down = gone();
          if (down) throw down;
          // Inside the transaction a statement is never prepared (PREPARE is session state),
          // only executed where the session already holds it.
          if (begun) return inner.query<R>(q.sessionPrepared === undefined || (q.values?.length ?? 0) > 0 ? q : { text: sessionText(client, q) });
          begun = true;
          if ((q.values?.length ?? 0) === 0 && q.name === undefined) {
            if (q.sessionPrepared !== undefined) await prepareOnSession(client, q.sessionPrepared);
            try {
              const results = (await client.query(`BEGIN; ${sessionText(client, q)}`)) as unknown as pg.QueryResult[];
              const last = results[results.length - 1]!;
              return { rows: last.rows as R[], rowCount: last.rowCount ?? 0 };
            } catch (err) {
              throw translateDbError(err);
            }
          }
          if (pipelinable(client, [q])) return (await pipeline([BEGIN, q]))[1] as QueryResult<R>;
          await inner.query({ text: 'BEGIN' });
          return inner.query<R>(q);
        },
        async queryMany(sqls: readonly Sql[]): Promise<QueryResult<unknown>[]> {
          if (committed) throw ended();
          const down = gone();
          if (down) throw down;
          if (sqls.length > 0 && pipelinable(client, sqls)) {
            if (begun) return pipeline(sqls);
            begun = true;
            return (await pipeline([BEGIN, ...sqls])).slice(1);
          }
          // A statement this connection has not parsed yet: one by one (which parses it).
          const out: QueryResult<unknown>[] = [];
          for (const q of sqls) out.push(await tx.query(q));
          return out;
        },
        async commitWith(sqls: readonly Sql[]): Promise<QueryResult<unknown>[]> {
          if (committed) throw ended();
          const down = gone();
          if (down) throw down;
          // Not pipelinable yet: one by one, and the COMMIT after the callback as usual.
          if (sqls.length === 0 || !pipelinable(client, sqls)) return tx.queryMany!(sqls);
          const opening = begun ? [] : [BEGIN];
          begun = true;
          const results = await pipeline([...opening, ...sqls, COMMIT]);
          // A COMMIT after a failed statement that the callback swallowed is answered with
          // ROLLBACK: report it, never a silent success.
          if (results.at(-1)!.command === 'ROLLBACK') throw rolledBack();
          committed = true;
          return results.slice(opening.length, -1);
        },
      };
      try {
        const result = await fn(tx);
        // Committed by commitWith: a connection lost after that COMMIT's answer lost nothing.
        if (committed) return result;
        const down = gone();
        if (down) throw down;
        if (begun) {
          // A COMMIT after a failed statement that the callback swallowed is answered with
          // ROLLBACK: report it, never a silent success.
          const done = await client.query('COMMIT');
          if (done.command === 'ROLLBACK') throw rolledBack();
        }
        return result;
      } catch (err) {
        if (begun && !committed && lost === undefined) {
          try {
            await client.query('ROLLBACK');
          } catch {
            broken = true; // connection is gone; do not return it to the pool
          }
        }
        if (lost !== undefined) {
          broken = true;
          // The statement in flight failed with the driver's own wording; report the cause.
          throw err instanceof DatabaseUnavailable ? err : new DatabaseUnavailable(lost);
        }
        throw translateDbError(err);
      } finally {
        client.removeListener('error', onLost);
        client.release(broken || lost !== undefined);
      }
    },

    async listen(channel, onNotify) {
      if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`invalid channel name: ${channel}`);
      let active = true;
      let client: pg.Client | undefined;
      let delay = 100;
      const connect = async (): Promise<void> => {
        if (!active || closed) return;
        const c = new pg.Client({ connectionString, application_name: `${opts.applicationName ?? 'everdict'}-listen` });
        c.on('notification', (n) => {
          if (n.channel === channel) onNotify(n.payload ?? '');
        });
        const retry = () => {
          listeners.delete(c);
          if (!active || closed) return;
          setTimeout(() => void connect().catch(() => {}), jitteredBackoffMs(delay)).unref();
          delay = Math.min(delay * 2, 5_000);
        };
        c.on('error', () => {});
        c.on('end', retry);
        try {
          await c.connect();
          await c.query(`LISTEN ${channel}`);
          listeners.add(c);
          client = c;
          delay = 100;
          onNotify(''); // a (re)connected listener may have missed notifications: wake once
        } catch {
          c.removeListener('end', retry);
          await c.end().catch(() => {});
          retry();
        }
      };
      await connect();
      return async () => {
        active = false;
        if (client) {
          listeners.delete(client);
          await client.end().catch(() => {});
        }
      };
    },

    async ping() {
      await direct.query({ text: 'SELECT 1' });
    },

    async close() {
      closed = true;
      await Promise.all([...listeners].map((c) => c.end().catch(() => {})));
      await Promise.all([pool.end(), deferredPool?.end()]);
    },
  };
}
