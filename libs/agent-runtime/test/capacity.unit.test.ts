/**
 * A read a per-case cap holds back (AT_CAPACITY) is not a tool result: the run suspends
 * `capacity` with the cap's wait, without consuming the turn and with the read's intent open;
 * the resumed turn runs it under the same call id. A real fault in the same batch wins.
 */
import { describe, expect, it } from 'vitest';
import { AtCapacity } from '@everdict/contracts';
import { resumeRun, runToSettlement, runTurn, type Tool } from '@everdict/agent-runtime';
import { answer, call, countingModel, harness, probeTool, scriptModel } from './harness.js';

function cappedRead(name: string, full: () => boolean): Tool & { runs: number } {
  const t = {
    runs: 0,
    descriptor: probeTool(name).descriptor,
    async invoke() {
      t.runs++;
      if (full()) throw new AtCapacity({ cap: 'externalCallsPerMinute', limit: 2, retryAfterMs: 1234 });
      return { content: `${name}: item 7` };
    },
  };
  return t;
}

describe('a read held back by a per-case cap', () => {
  it('suspends capacity with the wait, leaves its intent open, and the resumed turn runs it under the same call id', async () => {
    let full = true;
    const read = cappedRead('items', () => full);
    const model = countingModel(scriptModel([call(['items', { id: 7 }]), answer('done')]));
    const h = harness([], [read]);
    const deps = { ...h.deps, model };

    const first = await runTurn(deps, h.ctx, h.start);
    expect(first.settlement).toMatchObject({ kind: 'suspended', parkReason: 'capacity', cause: 'capacity', capacity: { cap: 'externalCallsPerMinute', limit: 2, retryAfterMs: 1234 } });
    expect(first.state.turn).toBe(0);
    const open = h.journal.get({ taskId: 'task-root', turn: 0, ordinal: 1 });
    expect(open?.status).toBe('intent');

    full = false;
    const r = await runToSettlement(deps, h.ctx, resumeRun(first.state));
    expect(r.settlement).toEqual({ kind: 'completed', result: 'done' });
    expect(h.journal.get({ taskId: 'task-root', turn: 0, ordinal: 1 })).toMatchObject({ callId: open!.callId, status: 'completed' });
    expect(read.runs).toBe(2);
  });
});
