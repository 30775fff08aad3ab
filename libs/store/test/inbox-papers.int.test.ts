import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { PaperCorrupt, PaperMissing } from '../src/errors.js';
import { seedCase, testStore } from './helpers.js';
import type { TestStore } from './helpers.js';

describe('inbox records and papers', () => {
  let t: TestStore;
  beforeAll(async () => {
    t = await testStore('inbox_papers');
  });
  afterAll(async () => t.close());

  it('first delivery is new, a redelivery is a duplicate with the prior disposition, a different hash conflicts', async () => {
    const id = newId();
    const first = await t.store.unitOfWork(async (uow) => {
      const check = await uow.checkInbox('turn-worker', id, 'sha256:aa', 'task.runnable');
      await uow.setInboxDisposition('turn-worker', id, 'ignored');
      return check;
    });
    expect(first).toEqual({ kind: 'new' });
    expect(await t.store.unitOfWork((uow) => uow.checkInbox('turn-worker', id, 'sha256:aa', 'task.runnable'))).toEqual({ kind: 'duplicate', disposition: 'ignored' });
    expect(await t.store.unitOfWork((uow) => uow.checkInbox('turn-worker', id, 'sha256:bb', 'task.runnable'))).toEqual({ kind: 'conflict', storedHash: 'sha256:aa' });
    // Another consumer keeps its own record of the same message.
    expect(await t.store.unitOfWork((uow) => uow.checkInbox('gate', id, 'sha256:aa', 'task.runnable'))).toEqual({ kind: 'new' });
  });

  it('concurrent duplicates of one message: exactly one is new', async () => {
    const id = newId();
    const results = await Promise.all(
      Array.from({ length: 8 }, () => t.store.unitOfWork((uow) => uow.checkInbox('gate', id, 'sha256:cc', 'gate.requested'))),
    );
    expect(results.filter((r) => r.kind === 'new')).toHaveLength(1);
    expect(results.filter((r) => r.kind === 'duplicate')).toHaveLength(7);
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
