import { describe, expect, it } from 'vitest';
import { canonicalJson } from '@everdict/contracts';
import { initialRunState, kernelRegistry, modelRequestFor } from '@everdict/agent-runtime';
import { routeIdentity } from '@everdict/llm';
import type { ChatMessage } from '@everdict/llm';
import { canonicalRequestDoc, canonicalTools, canonicalWithMessages } from '../src/canonical.js';

const route = routeIdentity('main', { adapter: 'scripted', model: 'script', scriptPath: 'x.json' });
const messages: ChatMessage[] = [
  { role: 'user', content: 'héllo "quoted" \u2028 line' },
  { role: 'assistant', content: null, toolCalls: [{ callId: 'c1', name: 'lookup', argumentsText: '{"b":1,"a":[2,1]}' }] },
  { role: 'tool', callId: 'c1', name: 'lookup', content: 'found 😀', isError: false },
];

describe('canonical documents built from cached pieces', () => {
  const registry = kernelRegistry([]);
  it.each([undefined, 512])('the request document equals canonicalJson of it (maxOutputTokens %s)', (maxOutputTokens) => {
    const state = { ...initialRunState('t1', 'objective'), messages };
    const ctx = { taskId: 't1', systemPrompt: 'You are "careful".', envelope: { scope: { reads: 'all' as const, writes: [], forbidden: [] }, budget: {} }, depth: 0, ...(maxOutputTokens ? { maxOutputTokens } : {}) };
    const request = modelRequestFor({ tools: registry }, ctx, state);
    const built = canonicalRequestDoc(route, request, canonicalTools(registry, request.tools));
    expect(built).toBe(canonicalJson({ route, request }));
    // Cached forms are reused, and still right for a longer history.
    const longer = modelRequestFor({ tools: registry }, ctx, { ...state, messages: [...messages, { role: 'user', content: 'more' }] });
    expect(canonicalRequestDoc(route, longer, canonicalTools(registry, longer.tools))).toBe(canonicalJson({ route, request: longer }));
  });

  it('a document with run.messages equals canonicalJson of it', () => {
    const doc = { schema: 'x', taskId: 't', z: [1, { b: 2, a: 1 }], run: { turn: 3, messages, objective: 'ö' }, a: null };
    expect(canonicalWithMessages(doc)).toBe(canonicalJson(doc));
  });
});
