/**
 * The transaction a delivery consumed alone runs in (Store.unitOfWorkOnInbox): its inbox row
 * rides with the unit of work's first statement that can carry it (sql/inbox.ts carryInbox), so
 * the row costs no statement of its own — the server's fixed cost of a statement (its portal,
 * executor start and end, its reply) is half of what a row of its own costs a one-statement unit of work
 * (`npm run bench:inbox`). A first statement that cannot carry it, a first call that sends
 * several statements at once (queryMany, commitWith), and a unit of work that sends nothing
 * insert the row alone, ahead of everything else.
 *
 * Invariants: every transaction that commits holds the row (a statement carried it, or it went
 * alone before any other or before COMMIT); the row and the statement carrying it succeed or
 * fail as one. A duplicate runs the
 * handler's code up to its first statement, and that statement, which fails with the insert:
 * nothing it wrote stays. Postgres runs an unreferenced WITH insert after the statement it
 * rides with, so that statement's row locks come before the inbox key's wait (README: the
 * inbox, on the deadlock a duplicate can meet against its original in a batch).
 */
import type { QueryResult, Queryable, Sql } from './db.js';
import { carryInbox, insertInbox } from './sql/inbox.js';
import type { InboxRow } from './store.js';

/** Where the row stands in this transaction: not sent yet, in a statement not (yet) answered, inserted. */
export type InboxRowState = 'pending' | 'sent' | 'inserted';

export class InboxCarrier implements Queryable {
  private rowState: InboxRowState = 'pending';
  readonly queryMany?: (sqls: readonly Sql[]) => Promise<QueryResult<unknown>[]>;
  readonly commitWith?: (sqls: readonly Sql[]) => Promise<QueryResult<unknown>[]>;

  constructor(
    private readonly tx: Queryable,
    private readonly row: InboxRow,
  ) {
    // Several statements at once go as the port sends them, the row alone ahead of them.
    const many = tx.queryMany?.bind(tx);
    if (many) this.queryMany = async (sqls) => (await this.flush(), many(sqls));
    const commit = tx.commitWith?.bind(tx);
    if (commit) this.commitWith = async (sqls) => (await this.flush(), commit(sqls));
  }

  get state(): InboxRowState {
    return this.rowState;
  }

  async query<R>(q: Sql): Promise<QueryResult<R>> {
    if (this.rowState !== 'pending') return this.tx.query<R>(q);
    const carried = carryInbox(q, this.row);
    if (carried === undefined) {
      await this.flush();
      return this.tx.query<R>(q);
    }
    this.rowState = 'sent';
    const result = await this.tx.query<R>(carried);
    this.rowState = 'inserted';
    return result;
  }

  /** Inserts the row on its own unless a statement carried it already (before COMMIT, at the latest). */
  async flush(): Promise<void> {
    if (this.rowState !== 'pending') return;
    const { consumer, messageId, payloadHash, type, disposition } = this.row;
    this.rowState = 'sent';
    await this.tx.query(insertInbox(consumer, messageId, payloadHash, type, disposition));
    this.rowState = 'inserted';
  }
}
