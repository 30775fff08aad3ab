/**
 * The Db port over PGlite: Postgres compiled to WASM, in this process, file-backed (embedded
 * mode, DESIGN §7). The SQL is the same as on a server; what differs is that PGlite has ONE
 * session, so this adapter provides what a pool gave for free:
 *
 * - Every statement and every transaction takes its turn in one FIFO lane. A plain `query` from
 *   another async path while a transaction is open waits for COMMIT/ROLLBACK instead of
 *   running inside someone else's transaction (where a ROLLBACK would silently take it along).
 * - A `query`/`transaction`/`listen` on the Db from INSIDE its own open transaction would wait
 *   for itself forever; it is refused with `EmbeddedReentry` instead (use the handle you got).
 * - Row locks, SKIP LOCKED and advisory locks are all taken by the one session, so they never
 *   block; correctness comes from the lane serialising units of work, not from the locks.
 * - One process, one data directory: `<dataDir>/everdict.lock` refuses a second opener (two
 *   WASM Postgres instances on one directory corrupt it; PGlite itself does not check). The
 *   cluster lives in `<dataDir>/pgdata`, because PGlite refuses to initialise a directory
 *   that already holds a file such as the lock.
 *
 * Embedded mode is for a single-process quick start, not a fleet: PGlite's filesystem layer
 * does not promise fsync-level durability on power loss.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import type { PGliteOptions, Results, Transaction } from '@electric-sql/pglite';
import { NodeFS } from '@electric-sql/pglite/nodefs';
import { EverdictError } from '@everdict/contracts';
import type { Db, QueryResult, Queryable, Sql } from './db.js';
import { DatabaseUnavailable, translateDbError } from './errors.js';

/** Another opener (this process or a live other one) already holds the data directory. */
export class DataDirLocked extends EverdictError {
  constructor(readonly dataDir: string, readonly holderPid: number) {
    super('data_dir_locked', `embedded database directory ${dataDir} is in use by process ${holderPid} (if that process is not Everdict, remove ${LOCK_FILE} there)`, {
      details: { dataDir, holderPid },
    });
  }
}

/** The Db was called from inside its own open transaction; on one session that never returns. */
export class EmbeddedReentry extends EverdictError {
  constructor(readonly operation: string) {
    super('embedded_reentry', `${operation} on the embedded Db from inside its own open transaction would wait for itself; use the transaction handle`, {
      details: { operation },
    });
  }
}

const LOCK_FILE = 'everdict.lock';
const CLUSTER_DIR = 'pgdata';
const INT8 = 20;
const BYTEA = 17;

// Same shapes as pg.ts returns: int8 as numbers (every bigint we use stays far below 2^53),
// bytea as Buffer. Numeric stays a string, timestamptz a Date, jsonb parsed — PGlite's defaults.
const PARSERS: PGliteOptions['parsers'] = {
  [INT8]: (v: string) => Number(v),
  [BYTEA]: (v: string) => Buffer.from(v.startsWith('\\x') ? v.slice(2) : v, 'hex'),
};

/**
 * Values as node-postgres would send them: plain objects become JSON text, bigints decimal
 * text; Buffers, Dates, arrays and scalars go to PGlite's type-directed serializers.
 */
function toParam(v: unknown): unknown {
  if (v === undefined || v === null) return null;
  if (typeof v === 'bigint') return v.toString();
  if (typeof v !== 'object' || v instanceof Uint8Array || v instanceof Date || Array.isArray(v)) return v;
  return JSON.stringify(v);
}

interface Session {
  query<T>(text: string, params?: unknown[]): Promise<Results<T>>;
  exec(text: string): Promise<Results[]>;
}

/**
 * A parameterless statement goes through the simple protocol, which — like node-postgres —
 * accepts several statements in one text (migrations). rowCount is pg's: rows affected for
 * DML (PGlite's affectedRows), rows returned otherwise (a SELECT … FOR UPDATE that found its
 * row is how a fence check succeeds).
 */
async function run<R>(s: Session, q: Sql): Promise<QueryResult<R>> {
  try {
    const res = q.values && q.values.length > 0 ? await s.query<R>(q.text, q.values.map(toParam)) : (await s.exec(q.text)).at(-1);
    const rows = (res?.rows ?? []) as R[];
    return { rows, rowCount: Math.max(res?.affectedRows ?? 0, rows.length) };
  } catch (err) {
    throw translateDbError(err);
  }
}

/** FIFO of async jobs: each starts only after the previous one settled. */
class Lane {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(job: () => Promise<T>): Promise<T> {
    const result = this.tail.then(job);
    this.tail = result.catch(() => undefined);
    return result;
  }
}

/** Lock files this process holds: our own pid in a lock file is only live if listed here. */
const heldLocks = new Set<string>();

/**
 * Exclusive ownership of a data directory across processes, by a pid file created O_EXCL. A
 * lock whose pid is dead is stale and taken over; so is one carrying OUR pid that we do not
 * hold — a previous incarnation, as in a restarted container where every run is pid 1. (Two
 * processes taking over the same stale lock in the same instant can both succeed; embedded
 * mode is one process, so that window is accepted.)
 */
function lockDataDir(dir: string): () => void {
  const path = join(dir, LOCK_FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx');
      writeSync(fd, String(process.pid));
      closeSync(fd);
      heldLocks.add(path);
      return () => {
        heldLocks.delete(path);
        try {
          unlinkSync(path);
        } catch {
          // already gone: nothing to release
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = Number(readFileSync(path, 'utf8').trim());
    const live = holder === process.pid ? heldLocks.has(path) : Number.isInteger(holder) && holder > 0 && processAlive(holder);
    if (live) throw new DataDirLocked(dir, holder);
    unlinkSync(path);
  }
  throw new DataDirLocked(dir, -1);
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Opens (creating if new) an embedded Postgres kept under `dataDir`, or a throwaway one with
 * 'memory'.
 * Resolves once the database answers; rejects with DataDirLocked if the directory is in use.
 */
export async function createPgliteDb(dataDir: string | 'memory'): Promise<Db> {
  let unlock = () => {};
  let pglite: PGlite;
  if (dataDir === 'memory') {
    pglite = await PGlite.create({ parsers: PARSERS });
  } else {
    const dir = resolve(dataDir);
    mkdirSync(dir, { recursive: true });
    unlock = lockDataDir(dir);
    try {
      pglite = await PGlite.create({ fs: new NodeFS(join(dir, CLUSTER_DIR)), parsers: PARSERS });
    } catch (err) {
      unlock();
      throw err;
    }
  }

  const lane = new Lane();
  /** Set while a transaction callback (and anything it starts) runs; `open` flips at its end. */
  const inTransaction = new AsyncLocalStorage<{ open: boolean }>();
  let closed = false;

  const enter = <T>(operation: string, job: () => Promise<T>): Promise<T> => {
    if (inTransaction.getStore()?.open) return Promise.reject(new EmbeddedReentry(operation));
    if (closed) return Promise.reject(new DatabaseUnavailable(new Error('embedded database closed')));
    return lane.run(() => {
      if (closed) throw new DatabaseUnavailable(new Error('embedded database closed'));
      return job();
    });
  };

  return {
    query: <R>(q: Sql) => enter('query', () => run<R>(pglite, q)),

    // The embedded cluster commits every statement the same way: a deferred one is synchronous.
    queryDeferred: <R>(q: Sql) => enter('query', () => run<R>(pglite, q)),

    transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      return enter('transaction', () =>
        pglite.transaction(async (session: Transaction) => {
          const scope = { open: true };
          const handle: Queryable = {
            query: <R>(q: Sql) => (scope.open ? run<R>(session, q) : Promise.reject(new Error('transaction handle used after its transaction ended'))),
          };
          try {
            const result = await inTransaction.run(scope, () => fn(handle));
            // A statement error that `fn` swallowed leaves the transaction aborted, and COMMIT
            // would then quietly roll back. This probe fails (25P02) instead, so the caller
            // never mistakes a rolled-back unit of work for a committed one.
            await run(session, { text: 'SELECT 1' });
            return result;
          } finally {
            scope.open = false;
          }
        }).catch((err: unknown) => {
          throw translateDbError(err);
        }),
      );
    },

    async listen(channel, onNotify) {
      if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`invalid channel name: ${channel}`);
      // Notifications surface while PGlite is processing some statement (often a COMMIT in
      // the lane); hand them on from a clean context so the callback may use the Db freely.
      const deliver = (payload: string) => setImmediate(() => inTransaction.exit(() => onNotify(payload)));
      const unlisten = await enter('listen', () => pglite.listen(channel, deliver));
      deliver(''); // like a (re)connected pg listener: wake once for anything already waiting
      let active = true;
      return async () => {
        if (!active || closed) return;
        active = false;
        await enter('unlisten', () => unlisten());
      };
    },

    async ping() {
      await enter('ping', () => run(pglite, { text: 'SELECT 1' }));
    },

    async close() {
      if (closed) return;
      if (inTransaction.getStore()?.open) throw new EmbeddedReentry('close');
      // Queued work finishes first; anything submitted after this point is refused.
      await lane.run(async () => {
        closed = true;
        try {
          await pglite.close();
        } finally {
          unlock();
        }
      });
    },
  };
}
