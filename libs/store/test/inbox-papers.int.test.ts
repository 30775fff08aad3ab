import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { PaperCorrupt, PaperMissing } from '../src/errors.js';
import { recordInboxBatch } from '../src/inboxBatch.js';
import { seedCase, testStore } from './helpers.js';
import type { TestStore } from './helpers.js';
import type { UnitOfWork } from '../src/unitOfWork.js';

/** Closed-shape digests (the inline, session-prepared insert) and a free-form one (bind parameters). */
const AA = `sha256:${'aa'.repeat(32)}`;
const BB = `sha256:${'bb'.repeat(32)}`;
const CC = 'sha256:cc';

describe('inbox records and papers', () => {
  let t: TestStore;
  beforeAll(async () => {
    t = await testStore('inbox_papers');
  });
  afterAll(async () => t.close());

  it('first delivery is new, a redelivery is a duplicate with the prior disposition, a different hash conflicts', async () => {
    const id = newId();
    const row = (consumer: string, payloadHash: string) => ({ consumer, messageId: id, payloadHash, type: 'task.runnable', disposition: 'applied' as const });
    const first = await t.store.unitOfWorkOnInbox(row('turn-worker', AA), async (uow) => {
      await uow.setInboxDisposition('turn-worker', id, 'ignored');
      // The closed-shape insert ran as EXECUTE of the statement this session prepared.
      const { rows } = await uow.query<{ n: number }>({ text: "SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name = 'ev_inbox_insert'" });
      return rows[0]!.n;
    });
    expect(first).toEqual({ kind: 'new', value: 1 });
    // A redelivery's first statement carries its inbox row and fails with it: nothing it wrote stays.
    await t.store.db.query({ text: 'CREATE TABLE IF NOT EXISTS inbox_marks (message_id uuid NOT NULL)' });
    const mark = (uow: UnitOfWork) => uow.query({ name: 'test_inbox_mark', text: 'INSERT INTO inbox_marks (message_id) VALUES ($1::uuid)', values: [id] });
    expect(await t.store.unitOfWorkOnInbox(row('turn-worker', AA), mark)).toEqual({ kind: 'duplicate', disposition: 'ignored' });
    expect(await t.store.unitOfWorkOnInbox(row('turn-worker', BB), mark)).toEqual({ kind: 'conflict', storedHash: AA });
    expect((await t.store.db.query<{ n: number }>({ text: 'SELECT count(*)::int AS n FROM inbox_marks' })).rows[0]!.n).toBe(0);
    // Another consumer keeps its own record of the same message.
    expect(await t.store.unitOfWorkOnInbox(row('gate', AA), async () => 'gate ran')).toEqual({ kind: 'new', value: 'gate ran' });
  });

  it('concurrent duplicates of one message: exactly one is new', async () => {
    const id = newId();
    const results = await Promise.all(
      Array.from({ length: 8 }, () => t.store.unitOfWorkOnInbox({ consumer: 'gate', messageId: id, payloadHash: CC, type: 'gate.requested', disposition: 'applied' }, async () => 'ran')),
    );
    expect(results.filter((r) => r.kind === 'new')).toHaveLength(1);
    expect(results.filter((r) => r.kind === 'duplicate')).toHaveLength(7);
  });

  it('a batch records its new deliveries in one statement and skips the ones recorded already', async () => {
    const [known, a, b] = [newId(), newId(), newId()];
    const item = (messageId: string) => ({ messageId, payloadHash: AA, type: 'task.runnable' });
    await t.store.unitOfWork((uow) => recordInboxBatch(uow, 'gate', [item(known)]));
    const { fresh, prepared } = await t.store.unitOfWork(async (uow) => {
      const fresh = await recordInboxBatch(uow, 'gate', [item(b), item(known), item(a)]);
      const { rows } = await uow.query<{ n: number }>({ text: "SELECT count(*)::int AS n FROM pg_prepared_statements WHERE name = 'ev_inbox_insert_batch'" });
      return { fresh, prepared: rows[0]!.n };
    });
    expect(fresh).toEqual(new Set([a, b]));
    expect(prepared).toBe(1);
    const { rows } = await t.store.db.query<{ message_id: string; disposition: string; payload_hash: string; type: string }>({
      text: 'SELECT message_id, disposition, payload_hash, type FROM inbox_messages WHERE consumer = $1 AND message_id = ANY($2::uuid[]) ORDER BY message_id',
      values: ['gate', [known, a, b]],
    });
    expect(rows).toEqual([known, a, b].sort().map((message_id) => ({ message_id, disposition: 'applied', payload_hash: AA, type: 'task.runnable' })));
  });

  it('a batch unit of work inserts its rows plainly; a batch holding a recorded id runs again, skipping it', async () => {
    const [known, a, b, c] = [newId(), newId(), newId(), newId()];
    const item = (messageId: string) => ({ messageId, payloadHash: AA, type: 'task.runnable' });
    await t.store.unitOfWork((uow) => recordInboxBatch(uow, 'reconciler', [item(known)]));
    const seen: string[][] = [];
    const strict = await t.store.unitOfWorkOnInboxBatch('reconciler', [item(b), item(a)], async (uow, fresh) => {
      seen.push([...fresh].sort());
      const { rows } = await uow.query<{ name: string }>({ text: "SELECT name FROM pg_prepared_statements WHERE name LIKE 'ev_inbox_insert_batch%' ORDER BY name" });
      return rows.map((r) => r.name);
    });
    // No speculative insertion when nothing was recorded before: the plain insert ran.
    expect(strict).toContain('ev_inbox_insert_batch_strict');
    expect(seen).toEqual([[a, b].sort()]);
    seen.length = 0;
    const again = await t.store.unitOfWorkOnInboxBatch('reconciler', [item(c), item(known)], async (_uow, fresh) => {
      seen.push([...fresh]);
      return 'applied';
    });
    // The plain insert failed on the inbox key before the callback ran; the second attempt skipped the recorded id.
    expect(again).toBe('applied');
    expect(seen).toEqual([[c]]);
    const { rows } = await t.store.db.query<{ message_id: string }>({ text: 'SELECT message_id FROM inbox_messages WHERE consumer = $1 ORDER BY message_id', values: ['reconciler'] });
    expect(rows.map((r) => r.message_id)).toEqual([known, a, b, c].sort());
  });

  it('papers are revisioned and verified against their content hash on read', async () => {
    const { caseId } = await seedCase(t.store);
    const r1 = await t.store.unitOfWork((uow) => uow.putPaper({ caseId, kind: 'summary', name: 'summary', schemaId: 's.v1', bytes: Buffer.from('one') }));
    const r2 = await t.store.unitOfWork((uow) => uow.putPaper({ caseId, kind: 'summary', name: 'summary', schemaId: 's.v1', bytes: Buffer.from('two') }));
    expect(r2.paperId).toBe(r1.paperId);
    expect([r1.revision, r2.revision]).toEqual([1, 2]);
    expect((await t.store.readPaper(r1.paperId)).bytes.toString()).toBe('two');
    expect((await t.store.readPaper(r1.paperId, 1)).bytes.toString()).toBe('one');

    await t.store.db.query({ text: `UPDATE paper_revisions SET bytes = 'tw0'::bytea WHERE paper_id = $1 AND revision = 2`, values: [r1.paperId] });
    await expect(t.store.readPaper(r1.paperId)).rejects.toBeInstanceOf(PaperCorrupt);
    await expect(t.store.readPaper(newId())).rejects.toBeInstanceOf(PaperMissing);
  });

  it('opening a case twice on one origin key yields one case', async () => {
    const key = `webhook-${newId()}`;
    const results = await Promise.all(
      Array.from({ length: 10 }, () => t.store.unitOfWork((uow) => uow.openCase({ caseType: 'ticket', originKey: key, customer: 'acme' }))),
    );
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.caseId)).size).toBe(1);
  });
});
