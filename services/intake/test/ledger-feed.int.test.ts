/**
 * The live ledger's feed (ledgerStream.ts LedgerFeed) over real Postgres: it watches the heads of
 * the cases open streams follow and wakes a case's streams when its head moves — with no
 * NOTIFY from the writers (migration 0024) — and reads nothing while no stream is open.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase } from '@everdict/testkit';
import { Store, createPgDb, migrate } from '@everdict/store';
import type { Db, Sql } from '@everdict/store';
import { LedgerFeed } from '../src/ledgerStream.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('ledger feed', () => {
  let db: Db;
  let store: Store;
  /** Statements the feed's store ran (the port: the seam, not the thing under test). */
  const reads: Sql[] = [];
  beforeAll(async () => {
    const info = await freshDatabase('ledger_feed');
    db = createPgDb(info.url, { max: 4 });
    await migrate(db);
    store = new Store({ ...db, query: (q) => (reads.push(q), db.query(q)) });
  });
  afterAll(async () => db?.close());

  const openCase = () =>
    store.unitOfWork(async (uow) => (await uow.openCase({ caseType: 'test', originKey: `feed-${Math.random()}`, customer: 'acme' })).caseId);
  const append = (caseId: string) => store.unitOfWork((uow) => uow.appendLedger(caseId, { kind: 'console_probe', body: {} }));
  const waitFor = async (pred: () => boolean, ms = 2000) => {
    for (const until = Date.now() + ms; !pred() && Date.now() < until; ) await sleep(10);
    return pred();
  };

  it('wakes the streams of a case whose head moved (once on first sight), and only those', async () => {
    const feed = new LedgerFeed(50);
    feed.start(store);
    try {
      const [a, b] = [await openCase(), await openCase()];
      const wakes = { a: 0, b: 0 };
      const offA = feed.subscribe(a, () => wakes.a++);
      const offB = feed.subscribe(b, () => wakes.b++);
      // First sight of each head wakes once (an append may have raced the stream's first read).
      expect(await waitFor(() => wakes.a === 1 && wakes.b === 1)).toBe(true);
      await sleep(200);
      expect(wakes).toEqual({ a: 1, b: 1 });

      await append(a);
      expect(await waitFor(() => wakes.a === 2)).toBe(true);
      await sleep(200);
      expect(wakes).toEqual({ a: 2, b: 1 });

      offA();
      await append(a);
      await sleep(200);
      expect(wakes.a).toBe(2);
      offB();
    } finally {
      feed.stop();
    }
  });

  it('reads nothing while no stream is open', async () => {
    const feed = new LedgerFeed(20);
    feed.start(store);
    try {
      await sleep(100);
      reads.length = 0;
      await sleep(200);
      expect(reads.filter((q) => q.name === 'ev_ledger_heads')).toEqual([]);
      const off = feed.subscribe(await openCase(), () => {});
      reads.length = 0;
      await sleep(200);
      expect(reads.filter((q) => q.name === 'ev_ledger_heads').length).toBeGreaterThan(0);
      off();
    } finally {
      feed.stop();
    }
  });
});
