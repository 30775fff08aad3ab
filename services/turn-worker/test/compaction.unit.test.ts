import { describe, expect, it } from 'vitest';
import { initialRunState } from '@everdict/agent-runtime';
import type { RunState } from '@everdict/agent-runtime';
import type { ChatMessage } from '@everdict/llm';
import { buildSummary, cutIndex, summaryMessage, summaryMisses } from '../src/compaction.js';
import type { HostState } from '../src/statePaper.js';

const turn = (i: number): ChatMessage[] => [
  { role: 'assistant', content: null, toolCalls: [{ callId: `c${i}`, name: 'lookup', argumentsText: '{}' }] },
  { role: 'tool', callId: `c${i}`, name: 'lookup', content: `result ${i}`, isError: false },
];
const run: RunState = {
  ...initialRunState('t1', 'do it'),
  messages: [{ role: 'user', content: 'do it' }, ...turn(1), ...turn(2), ...turn(3)],
  todos: [
    { id: 'a', text: 'open', status: 'pending' },
    { id: 'b', text: 'closed', status: 'done' },
  ],
  children: [{ childTaskId: 'k1', spawnCallId: 's1', objective: 'help', status: 'running' }],
};
const host = { decisions: [{ kind: 'answer', ref: 'q1', turn: 2 }], pending: { calls: ['u1'], gates: [], messages: [] }, summary: null } as unknown as HostState;

describe('compaction', () => {
  it('never cuts between a tool call and its result', () => {
    expect(run.messages[cutIndex(run.messages, 2)]?.role).toBe('assistant');
    expect(run.messages[cutIndex(run.messages, 1)]?.role).toBe('assistant');
  });

  it('keeps pending work and decision references, and says what a summary lost', () => {
    const summary = buildSummary(run, host, run.messages.slice(0, 3));
    expect(summaryMisses(summary, run, host)).toEqual([]);
    expect(summary.pending.todos.map((t) => t.id)).toEqual(['a']);
    expect(summary.facts.map((f) => f.callId)).toEqual([null, null, 'c1']);
    const lossy = { ...summary, decisions: [], pending: { ...summary.pending, todos: [], calls: [] } };
    expect(summaryMisses(lossy, run, host)).toEqual(['todo:a', 'decision:answer:q1', 'call:u1']);
    expect(summaryMessage(summary, { paperId: 'p1', revision: 2 }).content).toContain('paper p1 revision 2');
  });
});
