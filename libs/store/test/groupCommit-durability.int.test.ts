/**
 * Group-committed writes (groupCommit.ts) against real Postgres.
 *
 * Deferred durability: a
 * write the caller may defer runs as one statement on the port's deferred sessions
 * (`synchronous_commit = off`, Db.queryDeferred) and is committed (visible) when it resolves; a write carrying a task transition is
 * synchronous whatever the caller asked; deferred and synchronous writes queued together never
 * share a statement.
 *
 * Stored blocks: a request tail (a content-keyed block) that a committed statement carried is
 * named, not carried, by the next write of the same case; one a stale part carried is carried
 * again. The statements are observed at the database port (a recording wrapper around the real
 * pg port: the seam, not the thing under test).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase } from '@everdict/testkit';
import { JournalCommitter } from '../src/groupCommit.js';
import { chainOf, manifestPaper } from '../src/history.js';
import { newPaper } from '../src/journal.js';
import type { TurnWrite } from '../src/journal.js';
import { createPgDb } from '../src/pg.js';
import { migrate } from '../src/migrate.js';
import { Store } from '../src/store.js';
import { claimTask } from '../src/tasks.js';
import type { Db, Sql } from '../src/db.js';
import { recording, seedCase } from './helpers.js';
import type { Logged } from './helpers.js';

const isJournal = (l: Logged) => l.name?.startsWith('ev_write_journals') === true;

describe('group commit (deferred durability, stored blocks)', () => {
  let store: Store;
  let log: Logged[];
  let close: () => Promise<void>;
  let pg: Db;
  beforeAll(async () => {
    const info = await freshDatabase('group_commit_durability');
    pg = createPgDb(info.url, { max: 4 });
    await migrate(pg);
    const r = recording(pg);
    store = new Store(r.db);
    log = r.log;
    close = () => pg.close();
  });
  afterAll(async () => close?.());

  const held = async () => {
    const { caseId, taskId } = await seedCase(store);
    const c = await claimTask(store.db, taskId, 'w', 60_000);
    if (!c.claimed) throw new Error('not claimed');
    return { caseId, token: c.token };
  };
  const paperWrite = (name: string): TurnWrite => ({
    papers: [newPaper({ kind: 'artefact', name, schemaId: 'test.v1', bytes: Buffer.from(name) })],
    completions: [],
    intents: [],
    checkpoint: null,
    ledger: null,
  });
  const paperCount = async (name: string) => (await store.db.query<{ n: number }>({ text: 'SELECT count(*)::int AS n FROM papers WHERE name = $1', values: [name] })).rows[0]!.n;

  it('the port runs a deferred statement on a session that commits without waiting for the flush, and only there', async () => {
    const setting = async (q: (s: Sql) => Promise<{ rows: { synchronous_commit: string }[] }>) => (await q({ text: 'SHOW synchronous_commit' })).rows[0]!.synchronous_commit;
    expect(await setting((s) => pg.queryDeferred(s))).toBe('off');
    expect(await setting((s) => pg.query(s))).toBe('on');
    expect(await pg.transaction((tx) => setting((s) => tx.query(s)))).toBe('on');
  });

  it('a deferred write is one statement through queryDeferred, visible once it resolves', async () => {
    const { caseId, token } = await held();
    const committer = new JournalCommitter(store);
    log.length = 0;
    await committer.write(token, caseId, paperWrite('deferred-a'), null, { deferDurability: true });
    expect(await paperCount('deferred-a')).toBe(1);
    const journal = log.filter(isJournal);
    expect(journal).toHaveLength(1);
    expect(journal[0]!.tx).toBe('deferred');
    expect(log.filter((l) => l.tx === 'deferred')).toHaveLength(1);
  });

  it('a write with a task transition is synchronous even when the caller asks to defer it', async () => {
    const { caseId, token } = await held();
    const committer = new JournalCommitter(store);
    log.length = 0;
    const release: TurnWrite = { ...paperWrite('released-b'), transition: { state: 'open', parkReason: null, parkDetail: null, wakeAfterMs: null } };
    await committer.write(token, caseId, release, null, { deferDurability: true });
    expect(await paperCount('released-b')).toBe(1);
    expect(log.some((l) => l.tx === 'deferred')).toBe(false);
    expect(log.filter(isJournal).map((l) => l.tx)).toEqual([null]);
  });

  it('deferred and synchronous writes queued in the same tick go in separate statements', async () => {
    const a = await held();
    const b = await held();
    const committer = new JournalCommitter(store, { concurrency: 1 });
    log.length = 0;
    await Promise.all([
      committer.write(a.token, a.caseId, paperWrite('deferred-c'), null, { deferDurability: true }),
      committer.write(b.token, b.caseId, paperWrite('sync-c'), null),
    ]);
    expect(await paperCount('deferred-c')).toBe(1);
    expect(await paperCount('sync-c')).toBe(1);
    const journal = log.filter(isJournal);
    expect(journal).toHaveLength(2);
    // Exactly one of the two statements ran deferred; the other alone, synchronously.
    expect(journal.filter((j) => j.tx === 'deferred').length).toBe(1);
    expect(journal.filter((j) => j.tx === null).length).toBe(1);
  });

  describe('stored blocks', () => {
    const tools = `],"tools":${JSON.stringify(Array.from({ length: 16 }, (_, i) => ({ description: `tool ${i}`, name: `t${i}` })))}}`;
    const requestWrite = (name: string, turn: string): TurnWrite => ({
      papers: [manifestPaper({ kind: 'artefact', name, schemaId: 'test.v1', before: '{"messages":[', items: chainOf([JSON.stringify({ content: turn })]), after: tools, tail: true })],
      completions: [],
      intents: [],
      checkpoint: null,
      ledger: null,
    });
    const tailHash = (w: TurnWrite) => w.papers[0]!.blocks!.find((b) => b.prev === null && b.bytes.toString() === tools)!.hash;
    /** The block hashes the last journal statement carried (its blocks part: rows with a `prev`). */
    const carried = () =>
      log
        .filter(isJournal)
        .at(-1)!
        .values!.filter((v): v is string => typeof v === 'string')
        .flatMap((v) => JSON.parse(v) as Record<string, unknown>[])
        .filter((row) => 'prev' in row)
        .map((row) => row['hash'] as string);
    const reassembles = async (name: string) =>
      (
        await store.db.query<{ ok: boolean }>({
          text: `SELECT 'sha256:' || encode(sha256(paper_document(r.paper_id, r.revision)), 'hex') = r.content_hash AS ok
                   FROM papers p JOIN paper_revisions r ON r.paper_id = p.id WHERE p.name = $1`,
          values: [name],
        })
      ).rows[0]?.ok;

    it('a tail a committed write carried is named, not carried, by the next write of the case, and the paper still reassembles', async () => {
      const { caseId, token } = await held();
      const committer = new JournalCommitter(store);
      const first = requestWrite('tail-1', 'one');
      await committer.write(token, caseId, first, null);
      expect(carried()).toContain(tailHash(first));
      const second = requestWrite('tail-2', 'two');
      await committer.write(token, caseId, second, null);
      expect(carried()).not.toContain(tailHash(second));
      expect(carried()).toHaveLength(1); // the new message's block only
      expect(await reassembles('tail-1')).toBe(true);
      expect(await reassembles('tail-2')).toBe(true);
      // Another case has no such block: its write carries the tail.
      const other = await held();
      await committer.write(other.token, other.caseId, requestWrite('tail-3', 'three'), null);
      expect(carried()).toContain(tailHash(second));
      expect(await reassembles('tail-3')).toBe(true);
    });

    it('a tail only a stale part carried is carried again', async () => {
      const { caseId, token } = await held();
      const committer = new JournalCommitter(store);
      const stale = { ...token, epoch: token.epoch + 1 };
      await expect(committer.write(stale, caseId, requestWrite('stale-1', 'one'), null)).rejects.toMatchObject({ code: 'stale_fence' });
      const next = requestWrite('stale-2', 'two');
      await committer.write(token, caseId, next, null);
      expect(carried()).toContain(tailHash(next));
      expect(await reassembles('stale-2')).toBe(true);
    });
  });
});
