/**
 * Request and state papers as history manifests (canonical.ts, turnJournal.ts, statePaper.ts):
 * the exact canonical bytes are reproducible from the manifest and its blocks, the content hash
 * is theirs, and a turn carries only the blocks of the messages it appended.
 */
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '@everdict/contracts';
import { initialRunState, kernelRegistry, modelRequestFor } from '@everdict/agent-runtime';
import { routeIdentity } from '@everdict/llm';
import type { ChatMessage } from '@everdict/llm';
import { contentHash, parseManifest, reassemble } from '@everdict/store';
import type { NewPaper } from '@everdict/store';
import { markMessagesDurable, requestDocument } from '../src/canonical.js';
import { modelIntentRow, TurnJournal } from '../src/turnJournal.js';
import { stateDocument, statePaper } from '../src/statePaper.js';
import type { HostState } from '../src/statePaper.js';

const route = routeIdentity('main', { adapter: 'scripted', model: 'script', scriptPath: 'x.json' });
const registry = kernelRegistry([]);
const ctx = { taskId: 't1', systemPrompt: 'You are "careful".', envelope: { scope: { reads: 'all' as const, writes: [], forbidden: [] }, budget: {} }, depth: 0, maxOutputTokens: 256 };
const tool = (i: number): ChatMessage => ({ role: 'tool', callId: `c${i}`, name: 'lookup', content: `${i}:${'r'.repeat(2048)} ✓ "q"`, isError: false });
const host: HostState = { pending: { calls: [], gates: [], messages: [] }, paperHeads: {}, handleScopeCaseId: 'case', completedPlanSteps: [], decisions: [], summary: null, contextHash: null, versions: {} as HostState['versions'], context: { envelope: ctx.envelope as HostState['context']['envelope'], mode: null, depth: 0, tools: null } };

/** The document a manifest paper stands for, from the blocks `written` so far. */
function documentOf(paper: NewPaper, written: Map<string, { prev: string | null; bytes: Buffer }>): Buffer {
  for (const b of paper.blocks ?? []) written.set(b.hash, b);
  return reassemble(parseManifest(paper.bytes)!, written);
}

describe('history manifests of the turn papers', () => {
  it('the request document is the exact canonical request; its intent paper hashes those bytes', () => {
    const state = { ...initialRunState('t1', 'objective'), messages: [{ role: 'user' as const, content: 'héllo \u2028' }, tool(1)] };
    const request = modelRequestFor({ tools: registry }, ctx, state);
    const form = requestDocument('t1', route, request, registry)!;
    const exact = Buffer.from(canonicalJson({ route, request }), 'utf8');
    expect(form.hash).toBe(contentHash(exact));
    const row = modelIntentRow({ taskId: 't1', turn: 0, ordinal: 0, callId: 'call', kind: 'model', name: 'main', request: { route, request }, requestHash: '' }, 'main', {} as never, form);
    expect(row.call.requestHash).toBe(contentHash(exact));
    expect(row.request.layout).toBe('history-manifest.v1');
    expect(documentOf(row.request, new Map()).equals(exact)).toBe(true);
    // The next request hashes on from this one's running hash, and to the same value as from scratch.
    const longer = modelRequestFor({ tools: registry }, ctx, { ...state, messages: [...state.messages, tool(2), tool(3)] });
    expect(requestDocument('t1', route, longer, registry)!.hash).toBe(contentHash(Buffer.from(canonicalJson({ route, request: longer }), 'utf8')));
    expect(requestDocument('t1', route, longer, registry)!.hash).toBe(contentHash(Buffer.from(canonicalJson({ route, request: longer }), 'utf8')));
    // Without a form built by the caller, the row builds the same one.
    const again = modelIntentRow({ taskId: 't1', turn: 0, ordinal: 0, callId: 'call', kind: 'model', name: 'main', request: { route, request }, requestHash: '' }, 'main', {} as never);
    expect(again.call.requestHash).toBe(contentHash(exact));
  });

  it('turn after turn, the papers stay small and carry only the appended blocks', () => {
    const written = new Map<string, { prev: string | null; bytes: Buffer }>();
    let run = initialRunState('t2', 'objective');
    const sizes: number[] = [];
    for (let t = 0; t < 60; t++) {
      const messages = [...run.messages, { role: 'assistant' as const, content: null, toolCalls: [{ callId: `c${t}`, name: 'lookup', argumentsText: '{}' }] }, tool(t)];
      run = { ...run, turn: t + 1, messages };
      const paper = statePaper(stateDocument('case', host, run));
      const exact = Buffer.from(canonicalJson(stateDocument('case', host, run)), 'utf8');
      expect(paper.contentHash).toBe(contentHash(exact));
      expect(documentOf(paper, written).equals(exact)).toBe(true);
      expect(paper.blocks!.length).toBe(t === 0 ? 4 : 3); // the appended messages and the tool result's span
      sizes.push(paper.bytes.length + paper.blocks!.reduce((n, b) => n + b.bytes.length, 0));
      markMessagesDurable('t2', run.messages); // the commit that carried them is durable
    }
    // O(1) per turn: the last turn's paper and blocks are about the first's size.
    expect(sizes[59]!).toBeLessThan(sizes[1]! * 1.2);
  });

  it('a turn whose request the previous commit prewrote is not canonicalised or hashed again', () => {
    const state = { ...initialRunState('t3', 'objective'), messages: [{ role: 'user' as const, content: 'go' }, tool(9)] };
    const request = modelRequestFor({ tools: registry }, ctx, state);
    // A marker hash: it can only come back if the journal reused the prewritten record.
    const prewritten = { taskId: 't3', turn: 4, ordinal: 0, callId: 'c', kind: 'model' as const, name: 'main', request: { route, request }, requestHash: 'sha256:prewritten', status: 'intent' as const, response: null, responseHash: null };
    const scope = { token: { taskId: 't3' }, turn: 4, registry, stored: new Map(), prewritten };
    const journal = new TurnJournal(scope as unknown as ConstructorParameters<typeof TurnJournal>[0]);
    // The kernel builds its request anew from the same committed state (the same objects).
    expect(journal.requestHash({ route, request: modelRequestFor({ tools: registry }, ctx, state) })).toBe('sha256:prewritten');
    // Another message list (e.g. a note appended) is hashed: the real hash of its exact bytes.
    const other = modelRequestFor({ tools: registry }, ctx, { ...state, messages: [...state.messages, { role: 'user', content: 'note' }] });
    expect(journal.requestHash({ route, request: other })).toBe(contentHash(Buffer.from(canonicalJson({ route, request: other }), 'utf8')));
  });
});
