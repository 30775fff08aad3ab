/**
 * The database port. Deliberately narrow — one query, one transaction, one listener — so an
 * embedded Postgres (PGlite, DESIGN §7) can stand in for a server without touching the SQL.
 * Only the store's unit of work and the migrator call `transaction`.
 */

/** A SQL statement as data: builders return these, only the port executes them. */
export interface Sql {
  readonly text: string;
  readonly values?: readonly unknown[];
  /** Name for a server-side prepared statement on hot paths (ignored by ports without it). */
  readonly name?: string;
  /**
   * A parameterless statement (`text`, values inline) that may instead run as EXECUTE of a
   * statement prepared once per session: the server then parses and plans only the EXECUTE,
   * while the statement still travels in one simple-protocol round trip (e.g. with BEGIN).
   * Only builders whose inline values all have closed, validated shapes set it. Ports without
   * session statements run `text`; both forms must do the same.
   */
  readonly sessionPrepared?: SessionPrepared;
}

/** A session-level prepared statement and one EXECUTE of it (see Sql.sessionPrepared). */
export interface SessionPrepared {
  /** Statement name, unique per text: `ev_` and lower-case. */
  readonly name: string;
  /** The `PREPARE name (types) AS …` text, run once per connection outside any transaction. */
  readonly prepare: string;
  /** The `EXECUTE name (literals…)` text. */
  readonly execute: string;
}

export interface QueryResult<R> {
  readonly rows: R[];
  readonly rowCount: number;
}

export interface Queryable {
  query<R = Record<string, unknown>>(sql: Sql): Promise<QueryResult<R>>;
  /**
   * Runs the statements in order, in ONE round trip where the port can (a transaction's on
   * Postgres); resolves to each one's result. The first failure rejects the call and the
   * statements after it do not run (in a transaction, which that failure aborts as any other).
   * A port without it runs them one by one (UnitOfWork.queryMany).
   */
  queryMany?(sqls: readonly Sql[]): Promise<QueryResult<unknown>[]>;
  /**
   * Runs the statements and then COMMIT, in ONE round trip where the port can: the transaction
   * ends with them, and nothing may run in it after. A failure of any of them rejects the call
   * and commits nothing. A port without it runs them one by one and commits as usual
   * (UnitOfWork.commitWith).
   */
  commitWith?(sqls: readonly Sql[]): Promise<QueryResult<unknown>[]>;
}

export interface Db extends Queryable {
  /**
   * Runs ONE statement as its own transaction whose COMMIT returns without waiting for the WAL
   * flush (`synchronous_commit = off`): committed and visible when it resolves, durable once
   * any later synchronous commit flushes the WAL (Postgres flushes it in order). A port without
   * deferred durability may commit it synchronously; nothing may rely on it being lost.
   */
  queryDeferred<R = Record<string, unknown>>(sql: Sql): Promise<QueryResult<R>>;
  /** Runs `fn` inside BEGIN … COMMIT on one connection; ROLLBACK if it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** LISTEN on a channel on a dedicated connection; resolves to an unlisten function. */
  listen(channel: string, onNotify: (payload: string) => void): Promise<() => Promise<void>>;
  /** Cheap liveness probe for /readyz. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
