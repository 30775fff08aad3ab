/**
 * Resumability: a turn re-run from the same restored state replays the journal. A completed
 * call is folded in, never executed again; the model is re-asked only when its response was
 * never persisted; a write that left no outcome is not dispatched again on a guess.
 */
import { describe, expect, it } from 'vitest';
import { runTurn } from '@everdict/agent-runtime';
import { answer, call, countingModel, harness, probeTool, scriptModel, toolResults } from './harness.js';

const TODO = { items: [{ id: 'a', text: 'read the ticket', status: 'done' }] };

function setup() {
  const read = probeTool('read_a');
  const write = probeTool('write_b', { access: 'write' });
  const model = countingModel(scriptModel([call(['read_a', {}], ['todo', TODO], ['write_b', {}]), answer('done')]));
  const h = harness([], [read, write], { scope: { reads: 'all', writes: ['write_b'], forbidden: [] } });
  const deps = { ...h.deps, model };
  return { h, deps, model, read, write };
}

describe('turn replay from the journal', () => {
  it('re-running a finished turn from its start state asks nothing and runs nothing again', async () => {
    const { h, deps, model, read, write } = setup();
    const first = await runTurn(deps, h.ctx, h.start);
    const again = await runTurn(deps, h.ctx, h.start);
    expect(model.asked).toBe(1);
    expect(read.calls).toHaveLength(1);
    expect(write.calls).toHaveLength(1);
    expect(again.state).toEqual(first.state); // recorded todo effect folded back in
    expect(again.state.todos).toEqual(TODO.items);
    expect(toolResults(again.events).every((e) => e.replayed)).toBe(true);
  });

  type Setup = ReturnType<typeof setup>;
  const forget = (s: Setup, ...ordinals: number[]) => ordinals.forEach((ordinal) => s.h.journal.forgetOutcome({ taskId: 'task-root', turn: 0, ordinal }));

  it.each<[string, (s: Setup) => Promise<void>, boolean, number, number, string]>([
    // [crash point, what the dead worker left behind, model re-asked?, read runs, write runs, write outcome]
    [
      'after the model intent, before its response was persisted',
      async (s) => void (await s.h.journal.recordIntent({ taskId: 'task-root', turn: 0, ordinal: 0, callId: 'dead-worker-call', kind: 'model', name: 'test', request: {}, requestHash: 'sha256:x' })),
      true, 1, 1, 'ok',
    ],
    ['after the response, with every tool intent open', async (s) => (await runTurn(s.deps, s.h.ctx, s.h.start), forget(s, 1, 2, 3)), false, 2, 1, 'unknown'],
    ['after the read and todo, before the write finished', async (s) => (await runTurn(s.deps, s.h.ctx, s.h.start), forget(s, 3)), false, 1, 1, 'unknown'],
    ['after the turn, before the checkpoint commit', async (s) => void (await runTurn(s.deps, s.h.ctx, s.h.start)), false, 1, 1, 'ok'],
  ])('crash %s', async (_c, crash, reasked, readRuns, writeRuns, writeOutcome) => {
    const s = setup();
    await crash(s);
    const asked = s.model.asked;
    const resumed = await runTurn(s.deps, s.h.ctx, s.h.start);
    expect(s.model.asked - asked).toBe(reasked ? 1 : 0);
    // Totals over both workers: a read with no outcome may run again; a write never does.
    expect(s.read.calls).toHaveLength(readRuns);
    expect(s.write.calls).toHaveLength(writeRuns);
    expect(toolResults(resumed.events).find((e) => e.tool === 'write_b')?.outcome).toBe(writeOutcome);
    expect(resumed.state.todos).toEqual(TODO.items);
    expect(resumed.state.turn).toBe(1);
  });

  it('a write whose effect commits with its outcome (outcomeAtomic) runs again instead of being withheld as unknown', async () => {
    const s = setup();
    const atomic = probeTool('write_b', { access: 'write', outcomeAtomic: true });
    const deps = { ...s.deps, tools: harness([], [s.read, atomic], { scope: { reads: 'all', writes: ['write_b'], forbidden: [] } }).deps.tools };
    await runTurn(deps, s.h.ctx, s.h.start);
    forget(s, 3);
    const resumed = await runTurn(deps, s.h.ctx, s.h.start);
    expect(atomic.calls).toHaveLength(2);
    expect(toolResults(resumed.events).find((e) => e.tool === 'write_b')?.outcome).toBe('ok');
  });

  it('a resumed turn keeps the call id allocated before the crash', async () => {
    const { h, deps } = setup();
    await runTurn(deps, h.ctx, h.start);
    const before = h.journal.get({ taskId: 'task-root', turn: 0, ordinal: 1 })!.callId;
    h.journal.forgetOutcome({ taskId: 'task-root', turn: 0, ordinal: 1 });
    const resumed = await runTurn(deps, h.ctx, h.start);
    expect(toolResults(resumed.events).find((e) => e.ordinal === 1)?.callId).toBe(before);
    expect(h.journal.get({ taskId: 'task-root', turn: 0, ordinal: 1 })?.status).toBe('completed');
  });

  it('a route swapped after the response was persisted does not re-ask; a different request is refused', async () => {
    const { h, deps, model } = setup();
    const first = await runTurn(deps, h.ctx, h.start);
    const swapped = countingModel(scriptModel([answer('other route')], 'swapped-route'));
    const again = await runTurn({ ...deps, model: swapped }, h.ctx, h.start);
    expect(swapped.asked).toBe(0);
    expect(model.asked).toBe(1);
    expect(again.state).toEqual(first.state);
    const diverged = { ...h.start, messages: [{ role: 'user' as const, content: 'a different objective' }] };
    await expect(runTurn(deps, h.ctx, diverged)).rejects.toMatchObject({ code: 'journal_request_mismatch' });
  });

  it('a settled run refuses another turn', async () => {
    const { h, deps } = setup();
    const t0 = await runTurn(deps, h.ctx, h.start);
    const t1 = await runTurn(deps, h.ctx, t0.state);
    expect(t1.settlement?.kind).toBe('completed');
    await expect(runTurn(deps, h.ctx, t1.state)).rejects.toMatchObject({ code: 'run_settled' });
  });
});
