/**
 * A read whose connector is down (TOOL_UNAVAILABLE) is not a tool result: the run suspends
 * `connector_down` without consuming the turn, the read's intent stays open, what completed in
 * its batch is recorded, no later call starts; the resumed turn replays the response and runs the
 * read again under its call id. A write that throws the same code is answered as a tool error.
 */
import { describe, expect, it } from 'vitest';
import { EverdictError, TOOL_UNAVAILABLE } from '@everdict/contracts';
import { resumeRun, runToSettlement, runTurn, type Tool } from '@everdict/agent-runtime';
import { answer, call, countingModel, harness, probeTool, scriptModel } from './harness.js';

const down = () => new EverdictError(TOOL_UNAVAILABLE, 'tickets: unavailable (ECONNREFUSED)', { retryable: true, details: { connector: 'mcp:tickets' } });

/** A read that throws TOOL_UNAVAILABLE while `isDown()`. */
function flakyRead(name: string, isDown: () => boolean): Tool & { runs: number } {
  const t = {
    runs: 0,
    descriptor: { ...probeTool(name).descriptor, independent: true },
    async invoke() {
      t.runs++;
      if (isDown()) throw down();
      return { content: `${name}: ticket 7` };
    },
  };
  return t;
}

describe('a read whose connector is down', () => {
  it('suspends connector_down, leaves its intent open, and the resumed turn runs it again under the same call id', async () => {
    let serverDown = true;
    const lookup = flakyRead('lookup', () => serverDown);
    const sibling = probeTool('sibling', { independent: true, output: 'sibling ok' });
    const later = probeTool('later', { output: 'later ok' });
    const model = countingModel(scriptModel([call(['sibling', {}], ['lookup', { id: 7 }], ['todo', { items: [] }], ['later', {}]), answer('done')]));
    const h = harness([], [lookup, sibling, later]);
    const deps = { ...h.deps, model };

    const first = await runTurn(deps, h.ctx, h.start);
    expect(first.settlement).toMatchObject({ kind: 'suspended', parkReason: 'connector_down', cause: 'connector_down', connector: 'mcp:tickets' });
    expect(first.state.turn).toBe(0); // the turn is not consumed
    const key = (ordinal: number) => ({ taskId: 'task-root', turn: 0, ordinal });
    // The batch it was in finished (the sibling's outcome is recorded); nothing after it started.
    expect(h.journal.get(key(1))?.status).toBe('completed');
    const open = h.journal.get(key(2));
    expect(open?.status).toBe('intent');
    expect(h.journal.get(key(3))).toBeUndefined();
    expect(later.calls).toHaveLength(0);

    serverDown = false;
    const r = await runToSettlement(deps, h.ctx, resumeRun(first.state));
    expect(r.settlement).toEqual({ kind: 'completed', result: 'done' });
    expect(model.asked).toBe(2); // turn 0 once (replayed on resume), turn 1 once
    expect(h.journal.get(key(2))).toMatchObject({ callId: open!.callId, status: 'completed' });
    expect(sibling.calls).toHaveLength(1);
    expect(lookup.runs).toBe(2);
    expect(later.calls).toHaveLength(1);
    expect(r.state.messages.filter((m) => m.role === 'tool').map((m) => m.content)).toContain('lookup: ticket 7');
  });

  it('a write that throws it is a tool error: whether it landed is not guessed', async () => {
    const write: Tool = {
      descriptor: { ...probeTool('file_ticket').descriptor, access: 'write' },
      invoke: async () => {
        throw down();
      },
    };
    const h = harness([call(['file_ticket', {}]), answer('gave up')], [write], { scope: { reads: 'all', writes: ['file_ticket'], forbidden: [] }, permission: () => ({ decision: 'allow' }) });
    const r = await h.run();
    expect(r.settlement).toEqual({ kind: 'completed', result: 'gave up' });
    expect(h.journal.get({ taskId: 'task-root', turn: 0, ordinal: 1 })?.status).toBe('failed');
    expect(r.events).toContainEqual(expect.objectContaining({ type: 'tool_result', tool: 'file_ticket', outcome: 'tool_error', isError: true }));
  });
});
