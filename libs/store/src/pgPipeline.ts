/**
 * Several statements in ONE round trip on a node-postgres client (extended protocol: each
 * statement's Bind, Describe and Execute, then a single Sync). The server runs them in order, in
 * the client's current transaction, exactly as if they were sent one after another; the first
 * error makes it skip the rest up to the Sync, so a failure leaves the statements after it
 * unrun. That single Sync is why this is not node-postgres' own pipeline mode (`pipeline: true`),
 * which ends every query with a Sync of its own: a BEGIN sent that way ahead of a statement
 * would, should it fail, leave the statement to run and commit on its own, outside the unit of
 * work. This is a `Submittable` built on node-postgres' `Query`, whose result handling already
 * splits a multi-statement reply into one Result per statement.
 *
 * Measured reason: on a loaded 2-core machine every round trip of a unit of work waits for the
 * scheduler on both sides; a task's finish (its write, then its case's derivation, BEGIN first)
 * took about twice a plain turn's commit and made most of the half-load latency tail.
 *
 * Only statements the connection can run without a Parse of a NAMED statement are pipelined: a
 * named statement must be parsed on this connection already (else the caller runs the batch one
 * by one, which parses it). An unnamed statement is parsed in the pipeline itself. This keeps
 * node-postgres' record of parsed statements exact: it is only ever updated by its own queries.
 */
import pg from 'pg';
import type { QueryResult, Sql } from './db.js';

/** The parts of node-postgres' connection the pipeline writes to (its protocol writer). */
interface Connection {
  readonly parsedStatements: Record<string, string | undefined>;
  parse(m: { text: string; name?: string; types?: unknown[] }): void;
  bind(m: { portal?: string; statement?: string; values?: unknown[]; binary?: boolean; valueMapper?: (v: unknown) => unknown }): void;
  describe(m: { type: 'P' | 'S'; name?: string }): void;
  execute(m: { portal?: string; rows?: number }): void;
  sync(): void;
}

interface PgResult {
  readonly rows: unknown[];
  readonly rowCount: number | null;
  readonly command: string;
}

/** A pipelined statement's result, with the command tag the server answered (COMMIT, ROLLBACK, …). */
export interface PipelineResult extends QueryResult<unknown> {
  readonly command: string;
}

const connectionOf = (client: pg.ClientBase): Connection => (client as unknown as { connection: Connection }).connection;
/** node-postgres' own conversion of a parameter value to its wire form (not in its type declarations). */
const prepareValue = (pg as unknown as { utils: { prepareValue(v: unknown): unknown } }).utils.prepareValue;

/** The BEGIN a unit of work opens with, sent ahead of its first statement. */
export const BEGIN: Sql = { text: 'BEGIN' };
/** The COMMIT a unit of work may end with, sent behind its last statements (Queryable.commitWith). */
export const COMMIT: Sql = { text: 'COMMIT' };

/**
 * Whether `sqls` can go in one pipeline on `client`: each either a named statement already parsed
 * there (with this very text) or an unnamed one with parameters (which the extended protocol runs
 * anyway, so its text is one statement). A parameterless unnamed text may hold several
 * statements, which only the simple protocol runs; a session-prepared EXECUTE needs it too.
 */
export function pipelinable(client: pg.ClientBase, sqls: readonly Sql[]): boolean {
  const parsed = connectionOf(client).parsedStatements;
  return sqls.every((q) => q.sessionPrepared === undefined && (q.name !== undefined ? parsed[q.name] === q.text : (q.values?.length ?? 0) > 0));
}

class PipelineQuery extends pg.Query {
  constructor(
    private readonly statements: readonly { readonly sql: Sql; readonly values: unknown[] }[],
    callback: (err: Error | null, result: PgResult | PgResult[]) => void,
  ) {
    // No name: node-postgres then ignores the ParseComplete of the unnamed statements in here.
    super({ text: 'pipeline', queryMode: 'extended', callback } as unknown as pg.QueryConfig);
  }

  /** Called by node-postgres' `submit` with the socket corked: every message goes out in one write. */
  prepare(connection: Connection): void {
    for (const { sql, values } of this.statements) {
      if (sql.name === undefined) connection.parse({ text: sql.text, types: [] });
      connection.bind({ statement: sql.name ?? '', values, valueMapper: (v) => v });
      connection.describe({ type: 'P' });
      connection.execute({ rows: 0 });
    }
    connection.sync();
  }
}

/**
 * Runs `sqls` (at least one, `pipelinable` on `client`) in one round trip; resolves to each
 * statement's rows. Values are converted before anything is sent, so a value that cannot be
 * sent fails the call with nothing written to the connection.
 */
export function runPipeline(client: pg.ClientBase, sqls: readonly Sql[]): Promise<PipelineResult[]> {
  let statements: { sql: Sql; values: unknown[] }[];
  try {
    statements = sqls.map((sql) => ({ sql, values: (sql.values ?? []).map((v) => prepareValue(v)) }));
  } catch (err) {
    return Promise.reject(err);
  }
  return new Promise((resolve, reject) => {
    const query = new PipelineQuery(statements, (err, result) => {
      if (err) return reject(err);
      const results = Array.isArray(result) ? result : [result];
      if (results.length !== sqls.length) return reject(new Error(`pipeline of ${sqls.length} statements answered with ${results.length} results`));
      resolve(results.map((r) => ({ rows: r.rows, rowCount: r.rowCount ?? 0, command: r.command })));
    });
    void client.query(query as unknown as pg.QueryConfig);
  });
}
