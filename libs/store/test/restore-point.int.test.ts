/**
 * The restore point of a task whose state the caller holds (turn-worker heldStates.ts): the state
 * bytes are sent only when the latest checkpoint records another state, and a held state is
 * never trusted over a missing or re-hashed paper.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { PaperCorrupt, PaperMissing } from '../src/errors.js';
import { loadRestorePoint, newPaper, writeTurnAlone } from '../src/journal.js';
import { claimTask } from '../src/tasks.js';
import { seedCase, testStore } from './helpers.js';
import type { TestStore } from './helpers.js';

describe('restore point with a held state', () => {
  let t: TestStore;
  beforeAll(async () => {
    t = await testStore('restore_point', 4);
  });
  afterAll(async () => t.close());

  /** A claimed task with checkpoints at turns 1 and 2; returns the state hashes and paper ids. */
  async function checkpointed(): Promise<{ caseId: string; taskId: string; states: { hash: string; paperId: string; bytes: Buffer }[] }> {
    const { caseId, taskId } = await seedCase(t.store);
    const claim = await t.store.unitOfWork((uow) => claimTask(uow, taskId, 'worker-a', 60_000));
    if (!claim.claimed) throw new Error('the claim must win');
    const states = [];
    for (const turn of [1, 2]) {
      const bytes = Buffer.from(`{"turn":${turn},"x":"${newId()}"}`);
      const state = newPaper({ kind: 'artefact', name: `tasks/${taskId}/state/${turn}`, schemaId: 'runtime-state.v2', bytes });
      await writeTurnAlone(t.store, claim.token, caseId, { papers: [state], completions: [], intents: [], checkpoint: { turn, statePaperId: state.id, stateHash: state.contentHash, contextHash: null, versions: {} }, ledger: null }, null);
      states.push({ hash: state.contentHash, paperId: state.id, bytes });
    }
    return { caseId, taskId, states };
  }

  it('sends no state bytes when the latest checkpoint records the held state, and verified bytes otherwise', async () => {
    const { caseId, taskId, states } = await checkpointed();
    const held = await loadRestorePoint(t.store.db, taskId, caseId, states[1]!.hash);
    expect(held.checkpoint).toMatchObject({ turn: 2, stateHash: states[1]!.hash, bytes: null });
    // A state held from an earlier checkpoint is not the latest: the latest is read back.
    const older = await loadRestorePoint(t.store.db, taskId, caseId, states[0]!.hash);
    expect(older.checkpoint?.bytes?.equals(states[1]!.bytes)).toBe(true);
    const none = await loadRestorePoint(t.store.db, taskId, caseId);
    expect(none.checkpoint?.bytes?.equals(states[1]!.bytes)).toBe(true);
  });

  it('a held state does not stand in for a paper that is gone or stored under another hash', async () => {
    const missing = await checkpointed();
    await t.store.db.query({ text: 'DELETE FROM paper_revisions WHERE paper_id = $1::uuid', values: [missing.states[1]!.paperId] });
    await expect(loadRestorePoint(t.store.db, missing.taskId, missing.caseId, missing.states[1]!.hash)).rejects.toBeInstanceOf(PaperMissing);

    const rehashed = await checkpointed();
    await t.store.db.query({ text: `UPDATE paper_revisions SET content_hash = 'sha256:' || repeat('0', 64) WHERE paper_id = $1::uuid`, values: [rehashed.states[1]!.paperId] });
    await expect(loadRestorePoint(t.store.db, rehashed.taskId, rehashed.caseId, rehashed.states[1]!.hash)).rejects.toBeInstanceOf(PaperCorrupt);
  });
});
