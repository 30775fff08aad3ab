/** Compaction by size (compaction.ts): the context's bytes against the route's window, not a message count. */
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '@everdict/contracts';
import { initialRunState } from '@everdict/agent-runtime';
import type { ChatMessage } from '@everdict/llm';
import { compactionCut, compactionLimit, contextTokens, DEFAULT_CONTEXT_WINDOW_TOKENS, needsCompaction } from '../src/compaction.js';

const tool = (i: number, size: number): ChatMessage => ({ role: 'tool', callId: `c${i}`, name: 'lookup', content: 'x'.repeat(size), isError: false });
const call = (i: number): ChatMessage => ({ role: 'assistant', content: null, toolCalls: [{ callId: `c${i}`, name: 'lookup', argumentsText: '{}' }] });
const runOf = (pairs: number, size: number) => ({ ...initialRunState('t', 'objective'), messages: [{ role: 'user' as const, content: 'objective' }, ...Array.from({ length: pairs }, (_, i) => [call(i), tool(i, size)]).flat()] });

describe('compaction by size', () => {
  it('the limit is windowShare of the route window (defaults: 128k tokens, 0.75)', () => {
    expect(compactionLimit(undefined, undefined)).toEqual({ maxContextTokens: Math.floor(DEFAULT_CONTEXT_WINDOW_TOKENS * 0.75) });
    expect(compactionLimit({ windowShare: 0.5, keepRecent: 3 }, { contextWindowTokens: 8000 })).toEqual({ keepRecent: 3, maxContextTokens: 4000 });
  });

  it('many small messages do not trigger it; a few large ones do', () => {
    const limit = compactionLimit(undefined, { contextWindowTokens: 4000 }); // 3 000 tokens ≈ 12 000 bytes
    const many = runOf(100, 10);
    const few = runOf(3, 5000);
    expect(contextTokens(many)).toBe(many.messages.reduce((n, m) => n + Math.ceil(Buffer.byteLength(canonicalJson(m)) / 4), 0));
    expect(needsCompaction(runOf(20, 10), limit)).toBe(false);
    expect(needsCompaction(few, limit)).toBe(true);
    expect(few.messages.length).toBe(7);
  });

  it('the cut keeps the recent messages that fit in half the limit, never starting on a tool result', () => {
    const limit = compactionLimit(undefined, { contextWindowTokens: 4000 }); // keep ≤ 1 500 tokens ≈ 6 000 bytes
    const run = runOf(6, 2500);
    const cut = compactionCut(run, limit);
    expect(run.messages[cut]!.role).not.toBe('tool');
    const kept = run.messages.slice(cut);
    expect(kept.length).toBeGreaterThanOrEqual(2);
    expect(contextTokens({ ...run, messages: kept })).toBeLessThanOrEqual(1500 + 700); // the cut moved back onto the call
    expect(cut).toBeGreaterThan(1);
  });

  it('maxMessages, if set, still caps the message count', () => {
    const limit = compactionLimit({ maxMessages: 6 }, undefined);
    expect(needsCompaction(runOf(4, 10), limit)).toBe(true);
    expect(compactionCut(runOf(4, 10), limit)).toBeGreaterThan(0);
  });
});
