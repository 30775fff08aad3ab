/**
 * The two documents every turn writes, built from cached pieces and running hashes
 * (canonical.ts): their bytes are `canonicalJson` of the whole document and their hashes the
 * sha256 of those bytes, turn after turn, after a cut and for a restored (new) message list.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '@everdict/contracts';
import { initialRunState, kernelRegistry, modelRequestFor } from '@everdict/agent-runtime';
import { routeIdentity } from '@everdict/llm';
import type { ChatMessage } from '@everdict/llm';
import { documentBytes } from '@everdict/store';
import { requestDocument, stateDocumentSplice, type SplicedDocument } from '../src/canonical.js';

const route = routeIdentity('main', { adapter: 'scripted', model: 'script', scriptPath: 'x.json' });
const messages: ChatMessage[] = [
  { role: 'user', content: 'héllo "quoted" \u2028 line' },
  { role: 'assistant', content: null, toolCalls: [{ callId: 'c1', name: 'lookup', argumentsText: '{"b":1,"a":[2,1]}' }] },
  { role: 'tool', callId: 'c1', name: 'lookup', content: 'found 😀', isError: false },
];
const sha256 = (s: string) => `sha256:${createHash('sha256').update(s, 'utf8').digest('hex')}`;
const bytesOf = (d: SplicedDocument) => documentBytes(d.before, d.items, d.after).toString('utf8');

describe('canonical documents built from cached pieces', () => {
  const registry = kernelRegistry([]);
  it.each([undefined, 512])('the request document equals canonicalJson of it (maxOutputTokens %s)', (maxOutputTokens) => {
    const state = { ...initialRunState('t1', 'objective'), messages };
    const ctx = { taskId: 't1', systemPrompt: 'You are "careful".', envelope: { scope: { reads: 'all' as const, writes: [], forbidden: [] }, budget: {} }, depth: 0, ...(maxOutputTokens ? { maxOutputTokens } : {}) };
    const request = modelRequestFor({ tools: registry }, ctx, state);
    const built = requestDocument('t1', route, request, registry)!;
    expect(bytesOf(built)).toBe(canonicalJson({ route, request }));
    expect(built.hash).toBe(sha256(canonicalJson({ route, request })));
    // Cached forms are reused, and still right for a longer history.
    const longer = modelRequestFor({ tools: registry }, ctx, { ...state, messages: [...messages, { role: 'user', content: 'more' }] });
    const next = requestDocument('t1', route, longer, registry)!;
    expect(bytesOf(next)).toBe(canonicalJson({ route, request: longer }));
    expect(next.hash).toBe(sha256(canonicalJson({ route, request: longer })));
  });

  it('a state document splits around its top-level chat, and its hash runs on turn after turn', () => {
    const doc = (chat: readonly ChatMessage[], turn: number) => ({ schema: 'x', taskId: 't-state', caseId: 'c', chat, turn, contextHash: `h${turn}`, z: [1, { b: 2, a: 1 }], run: { turn, objective: 'ö' }, a: null });
    let chat: readonly ChatMessage[] = [];
    for (let turn = 0; turn < 8; turn++) {
      chat = [...chat, { role: 'user', content: `turn ${turn} "q" ✓` }, ...(turn % 3 === 0 ? messages : [])];
      const d = doc(chat, turn);
      const spliced = stateDocumentSplice(d)!;
      // Nothing that changes from turn to turn precedes the conversation.
      expect(spliced.before).toBe('{"a":null,"caseId":"c","chat":[');
      expect(bytesOf(spliced)).toBe(canonicalJson(d));
      expect(spliced.hash).toBe(sha256(canonicalJson(d)));
      // The same document again (a retried turn write) hashes the same.
      expect(stateDocumentSplice(d)!.hash).toBe(spliced.hash);
    }
    // A cut list (compaction) and a list of new objects with the same content (a restore).
    const cut = [{ role: 'user' as const, content: 'summary' }, ...chat.slice(5)];
    expect(stateDocumentSplice(doc(cut, 9))!.hash).toBe(sha256(canonicalJson(doc(cut, 9))));
    const restored = JSON.parse(JSON.stringify(chat)) as ChatMessage[];
    const grown = [...restored, { role: 'user' as const, content: 'after restore' }];
    expect(stateDocumentSplice(doc(restored, 10))!.hash).toBe(sha256(canonicalJson(doc(restored, 10))));
    expect(stateDocumentSplice(doc(grown, 11))!.hash).toBe(sha256(canonicalJson(doc(grown, 11))));
  });
});
