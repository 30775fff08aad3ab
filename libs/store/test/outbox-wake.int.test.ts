/**
 * Waking the relays after an enqueue (outboxWake.ts) against real Postgres. No writing
 * transaction NOTIFYs: Postgres serialises the commits of NOTIFYing transactions, cluster-wide,
 * across their WAL flushes. A relay of the same process is woken directly once the COMMIT has
 * returned; with none, another process's relay is woken by a NOTIFY sent after the commit on a
 * session that waits for no flush. "Another process" is a second pool on the same database
 * LISTENing on the relay's channel; the statements are observed at the database port (the seam).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { freshDatabase } from '@everdict/testkit';
import { JournalCommitter } from '../src/groupCommit.js';
import { newPaper } from '../src/journal.js';
import type { TurnWrite } from '../src/journal.js';
import { migrate } from '../src/migrate.js';
import { createPgDb } from '../src/pg.js';
import { OUTBOX_CHANNEL } from '../src/sql/outbox.js';
import { Store } from '../src/store.js';
import { claimTask } from '../src/tasks.js';
import type { Db } from '../src/db.js';
import { recording, seedCase } from './helpers.js';
import type { Logged } from './helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const notifies = (log: readonly Logged[]) => log.filter((l) => /pg_notify/i.test(l.text));

describe('outbox wake-up after COMMIT', () => {
  let pg: Db;
  let other: Db;
  let store: Store;
  let log: Logged[];
  /** Notifications the other process heard on the relay's channel. */
  const heard: string[] = [];
  let unlistenOther: () => Promise<void>;

  beforeAll(async () => {
    const info = await freshDatabase('outbox_wake');
    pg = createPgDb(info.url, { max: 4 });
    await migrate(pg);
    const r = recording(pg);
    store = new Store(r.db);
    log = r.log;
    other = createPgDb(info.url, { max: 2 });
    unlistenOther = await other.listen(OUTBOX_CHANNEL, (p) => heard.push(p));
  });
  afterAll(async () => {
    await unlistenOther?.();
    await other?.close();
    await pg?.close();
  });

  const outboxRows = async (messageId: string) => (await other.query<{ n: number }>({ text: 'SELECT count(*)::int AS n FROM outbox_messages WHERE message_id = $1::uuid', values: [messageId] })).rows[0]!.n;

  /** Lets earlier notifications arrive, then forgets them and the statements logged so far. */
  const settled = async () => {
    await sleep(200);
    heard.length = 0;
    log.length = 0;
  };

  /** Waits for any NOTIFY to arrive, then asserts none was sent and the other process heard none. */
  const nobodyNotified = async () => {
    await sleep(300);
    expect(notifies(log)).toEqual([]);
    expect(heard).toEqual([]);
  };

  /** A relay of this process: counts its wake-ups and, at each, whether the row is committed (read by the other pool). */
  async function localRelay(messageId: () => string) {
    const wakes: Promise<number>[] = [];
    /** The message ids each wake named. */
    const named: (readonly string[] | undefined)[] = [];
    const stop = await store.listenOutbox((ids) => {
      named.push(ids);
      wakes.push(outboxRows(messageId()));
    });
    await sleep(100); // the LISTEN connection's own wake on connect
    wakes.length = 0;
    named.length = 0;
    return { wakes, named, stop };
  }

  it('a unit of work that enqueues wakes the relay of its process once its COMMIT returned, and NOTIFYs nobody', async () => {
    const { caseId } = await seedCase(store);
    let current = newId();
    const relay = await localRelay(() => current);
    try {
      await settled();
      await store.unitOfWork((uow) => uow.enqueue({ id: current, type: 'task.runnable', caseId }, Buffer.from('m1')));
      // Woken when the unit of work returned, not later, naming the row, which is committed.
      expect(relay.wakes).toHaveLength(1);
      expect(await relay.wakes[0]).toBe(1);
      expect(relay.named).toEqual([[current]]);

      // A rolled-back enqueue wakes nobody.
      current = newId();
      await expect(
        store.unitOfWork(async (uow) => {
          await uow.enqueue({ id: current, type: 'task.runnable', caseId }, Buffer.from('m2'));
          throw new Error('handler failed');
        }),
      ).rejects.toThrow('handler failed');
      expect(relay.wakes).toHaveLength(1);

      await nobodyNotified();
    } finally {
      await relay.stop();
    }
  });

  it("a turn's group-commit statement that enqueues (a finish) wakes it the same way, without a NOTIFY in the statement", async () => {
    const { caseId, taskId } = await seedCase(store);
    const claim = await claimTask(store.db, taskId, 'w', 60_000);
    if (!claim.claimed) throw new Error('not claimed');
    const messageId = newId();
    const relay = await localRelay(() => messageId);
    try {
      await settled();
      const finish: TurnWrite = {
        papers: [newPaper({ kind: 'artefact', name: 'finish', schemaId: 'test.v1', bytes: Buffer.from('done') })],
        completions: [],
        intents: [],
        checkpoint: null,
        ledger: null,
        outbox: [{ messageId, type: 'task.finished', routingKey: 'task.finished', body: Buffer.from('finished') }],
      };
      await new JournalCommitter(store).write(claim.token, caseId, finish, null);
      expect(relay.wakes).toHaveLength(1);
      expect(await relay.wakes[0]).toBe(1);
      expect(relay.named).toEqual([[messageId]]);
      await nobodyNotified();
    } finally {
      await relay.stop();
    }
  });

  it('with no relay in the process, the commit wakes the other processes by a NOTIFY sent after it, on a session that waits for no flush', async () => {
    const { caseId } = await seedCase(store);
    await settled();
    const ids = [newId(), newId()];
    await store.unitOfWork(async (uow) => {
      for (const id of ids) await uow.enqueue({ id, type: 'task.runnable', caseId }, Buffer.from('m3'));
    });
    for (let i = 0; i < 100 && heard.length === 0; i++) await sleep(20);
    // The payload names the rows, so the other process's relay claims them by key.
    expect(heard).toEqual([ids.join(',')]);
    const sent = notifies(log);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.tx).toBe('deferred');
    // After the COMMIT: the transaction's own statements are all logged before it.
    const lastOfTx = log.findLastIndex((l) => typeof l.tx === 'number');
    expect(log.indexOf(sent[0]!)).toBeGreaterThan(lastOfTx);
  });

  it("the relay's claim, mark and release commit on that session too, each visible to every other relay the moment it returns", async () => {
    const { caseId } = await seedCase(store);
    const messageId = newId();
    await store.unitOfWork((uow) => uow.enqueue({ id: messageId, type: 'task.runnable', caseId }, Buffer.from('m4')));
    await settled();
    const otherStore = new Store(other);
    const row = async () =>
      (await other.query<{ claimed_by: string | null; published: boolean }>({ text: 'SELECT claimed_by, published_at IS NOT NULL AS published FROM outbox_messages WHERE message_id = $1::uuid', values: [messageId] })).rows[0]!;

    const claimed = await store.claimOutbox('relay-a', 10, 60_000);
    const seq = claimed.find((r) => r.message_id === messageId)!.seq;
    expect(await row()).toEqual({ claimed_by: 'relay-a', published: false });
    // Another relay sees the claim at once and takes nothing of it.
    expect((await otherStore.claimOutbox('relay-b', 10, 60_000)).map((r) => r.message_id)).not.toContain(messageId);

    await store.releaseOutbox([Number(seq)]);
    const again = await otherStore.claimOutbox('relay-b', 10, 60_000);
    expect(again.map((r) => r.message_id)).toContain(messageId);
    await store.markPublished([Number(seq)]);
    expect(await row()).toEqual({ claimed_by: 'relay-b', published: true });

    const relayStatements = log.filter((l) => /outbox_messages/.test(l.text));
    expect(relayStatements.map((l) => l.tx)).toEqual(['deferred', 'deferred', 'deferred']);
  });
});
