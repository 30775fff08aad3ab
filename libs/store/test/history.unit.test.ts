/** Content-addressed history (history.ts): manifests, chains and reassembly, pure. */
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '@everdict/contracts';
import { chainOf, contentHash, documentBytes, documentHash, HistoryBlockMissing, HistoryChain, linkHash, manifestPaper, parseManifest, reassemble, reassembleSpans, SPAN_MIN_BYTES, spannedPaper, spansOf, StoredBlocks } from '../src/index.js';
import type { HistoryBlock, HistoryItem } from '../src/index.js';

const messages = [{ role: 'user', content: 'objective' }, { role: 'assistant', content: 'a "quoted" reply ✓', toolCalls: [] }, { role: 'tool', content: 'x'.repeat(2048) }];
const doc = { request: { messages, system: 'prompt' }, route: { name: 'r' } };
const before = '{"request":{"messages":[';
const after = '],"system":"prompt"},"route":{"name":"r"}}';
const forms = messages.map((m) => canonicalJson(m));
const stored = (blocks: readonly HistoryBlock[]) => new Map(blocks.map((b) => [b.hash, b]));

describe('history manifests', () => {
  it('a manifest paper stands for the exact canonical bytes: its content hash is theirs, and it reassembles into them', () => {
    const items = chainOf(forms);
    const paper = manifestPaper({ kind: 'artefact', name: 'n', schemaId: 's', before, items, after });
    const exact = Buffer.from(canonicalJson(doc), 'utf8');
    expect(documentBytes(before, items, after).equals(exact)).toBe(true);
    expect(paper.contentHash).toBe(contentHash(exact));
    expect(documentHash(before, items, after)).toBe(contentHash(exact));
    expect(paper.layout).toBe('history-manifest.v1');
    expect(paper.blocks).toHaveLength(4); // the three messages and the span of the long tool result
    // The manifest is small: the list is named by its head, not repeated.
    expect(paper.bytes.length).toBeLessThan(300);
    const manifest = parseManifest(paper.bytes)!;
    expect(manifest).toMatchObject({ count: 3, head: items[2]!.hash });
    expect(reassemble(manifest, stored(paper.blocks!)).equals(exact)).toBe(true);
  });

  it('a long suffix (a request\'s tool schemas) is a tail block: the manifest stays small and reassembles exactly', () => {
    const tools = `],"tools":${canonicalJson(Array.from({ length: 20 }, (_, i) => ({ name: `t${i}`, inputSchema: { type: 'object' } })))}}`;
    const items = chainOf(forms);
    const paper = manifestPaper({ kind: 'artefact', name: 'n', schemaId: 's', before, items, after: tools, tail: true });
    const exact = Buffer.from(`${before}${forms.join(',')}${tools}`, 'utf8');
    expect(paper.contentHash).toBe(contentHash(exact));
    const manifest = parseManifest(paper.bytes)!;
    expect(manifest.tail).toBe(contentHash(Buffer.from(tools)));
    expect(paper.bytes.length).toBeLessThan(400);
    expect(paper.blocks).toHaveLength(5); // the messages, the tool result's span, the tail
    expect(reassemble(manifest, stored(paper.blocks!)).equals(exact)).toBe(true);
    const noTail = stored(paper.blocks!);
    noTail.delete(manifest.tail!);
    expect(() => reassemble(manifest, noTail)).toThrow(HistoryBlockMissing);
  });

  it('an empty list reassembles into before + after', () => {
    const paper = manifestPaper({ kind: 'artefact', name: 'n', schemaId: 's', before: '{"m":[', items: [], after: ']}' });
    expect(reassemble(parseManifest(paper.bytes)!, new Map()).toString()).toBe('{"m":[]}');
    expect(paper.contentHash).toBe(contentHash(Buffer.from('{"m":[]}')));
  });

  it('a missing block fails reassembly; an altered block yields bytes whose hash no longer matches', () => {
    const items = chainOf(forms);
    const paper = manifestPaper({ kind: 'artefact', name: 'n', schemaId: 's', before, items, after });
    const manifest = parseManifest(paper.bytes)!;
    const missing = stored(paper.blocks!);
    missing.delete(items[1]!.hash);
    expect(() => reassemble(manifest, missing)).toThrow(HistoryBlockMissing);
    const altered = stored(paper.blocks!);
    altered.set(items[2]!.hash, { ...items[2]!, bytes: Buffer.from(canonicalJson({ role: 'tool', content: 'forged' })) });
    expect(contentHash(reassemble(manifest, altered))).not.toBe(paper.contentHash);
    expect(parseManifest(Buffer.from('{"layout":"history-manifest.v1"'))).toBeNull();
  });

  it('links chain the whole prefix: the same message after another prefix is another block', () => {
    const a = chainOf(forms);
    const b = chainOf([canonicalJson({ role: 'user', content: 'summary' }), ...forms.slice(1)]);
    expect(a[1]!.hash).not.toBe(b[1]!.hash);
    expect(a[2]!.hash).toBe(linkHash(a[1]!.hash, Buffer.from(forms[2]!)));
  });
});

describe('HistoryChain', () => {
  it('a list that extends a durable one carries only the blocks it appended', () => {
    const chain = new HistoryChain();
    let calls = 0;
    const form = (m: object) => (calls++, canonicalJson(m));
    const first = messages.slice(0, 2);
    chain.markDurable('task', first, form);
    const next = [...first, messages[2]!];
    const items = chain.items('task', next, form);
    expect(items.map((i) => i.durable)).toEqual([true, true, false]);
    expect(items.map((i) => i.hash)).toEqual(chainOf(forms).map((i) => i.hash));
    expect(calls).toBe(3); // each message canonicalised once
    // Kept for the task's life: a view of Buffer's shared pool would keep a whole slab resident.
    for (const it of items) expect(it.bytes.buffer.byteLength).toBe(it.bytes.byteLength);
    const paper = manifestPaper({ kind: 'artefact', name: 'n', schemaId: 's', before, items, after });
    expect(paper.blocks!.map((b) => b.hash)).toEqual([items[2]!.hash, contentHash(Buffer.from('x'.repeat(2048)))]);
  });

  it('a conversation asked for again and again as it grows gets the from-scratch chain every time', () => {
    const chain = new HistoryChain();
    const form = (m: object) => canonicalJson(m);
    let list: object[] = [];
    for (let turn = 0; turn < 40; turn++) {
      const asked = [...list]; // the next turn's request: the same objects in another array
      expect(chain.items('task', asked, form).map((i) => i.durable)).toEqual(asked.map(() => true));
      list = [...asked, { role: 'assistant', content: `t${turn}` }, ...Array.from({ length: turn % 4 }, (_, k) => ({ role: 'tool', content: `${turn}.${k}` }))];
      const items = chain.items('task', list, form);
      expect(items.map((i) => i.hash)).toEqual(chainOf(list.map(form)).map((i) => i.hash));
      expect(items.map((i) => i.durable)).toEqual(list.map((_, i) => i < asked.length));
      chain.markDurable('task', list, form);
    }
    // A list that shares only a prefix (an item replaced by another, then more): its own hashes,
    // and nothing from the replaced item on is taken as stored.
    const other = [...list.slice(0, 10), { role: 'user', content: 'edited' }, ...list.slice(11), { role: 'user', content: 'new' }];
    const items = chain.items('task', other, form);
    expect(items.map((i) => i.hash)).toEqual(chainOf(other.map(form)).map((i) => i.hash));
    expect(items.map((i) => i.durable)).toEqual(other.map((_, i) => i < 10));
    // The items handed out are the caller's: changing them changes no later answer.
    items.length = 0;
    expect(chain.items('task', list, form).every((i) => i.durable)).toBe(true);
  });

  it('keeps a weight total with the chain: each list reads the sum of its own items, appended or cut', () => {
    const chain = new HistoryChain();
    const form = (m: object) => canonicalJson(m);
    const weigh = (it: HistoryItem) => it.bytes.length;
    const count = (it: HistoryItem) => (it.bytes.length > 0 ? 1 : 0);
    const sum = (list: readonly object[]) => list.reduce((n: number, m) => n + Buffer.byteLength(form(m)), 0);
    let weighed = 0;
    const counted = (it: HistoryItem) => (weighed++, weigh(it));
    let list: object[] = [];
    for (let turn = 0; turn < 30; turn++) {
      list = [...list, { role: 'assistant', content: `t${turn}` }, ...Array.from({ length: turn % 3 }, (_, k) => ({ role: 'tool', content: `${turn}.${k}` }))];
      expect(chain.total('task', list, form, counted)).toBe(sum(list));
      expect(chain.total('task', [...list], form, counted)).toBe(sum(list));
    }
    // Each item was weighed once: every turn took the earlier items' sum from the kept chain.
    expect(weighed).toBe(list.length);
    // Another function is summed over the whole list, not taken from the kept sum.
    expect(chain.total('task', list, form, count)).toBe(list.length);
    // A list cut before some items (compaction: a summary, then the recent items) and a list of
    // another scope sum their own items only.
    const cut = [{ role: 'user', content: 'summary' }, ...list.slice(-5)];
    expect(chain.total('task', cut, form, weigh)).toBe(sum(cut));
    expect(chain.total('other', list.slice(0, 7), form, weigh)).toBe(sum(list.slice(0, 7)));
    expect(chain.total('task', [], form, weigh)).toBe(0);
  });

  it('another scope, or a list cut before a message, does not reuse its durable link', () => {
    const chain = new HistoryChain();
    const form = (m: object) => canonicalJson(m);
    chain.markDurable('task', messages, form);
    expect(chain.items('other', messages, form).some((i) => i.durable)).toBe(false);
    const cut = [{ role: 'user', content: 'summary' }, messages[2]!];
    expect(chain.items('task', cut, form).map((i) => i.durable)).toEqual([false, false]);
  });
});

describe('spans (migration 0022)', () => {
  const text = 'Ab+/'.repeat(512);
  const args = { text, turn: 3 };
  const response = { output: { toolCalls: [{ callId: 'c1', name: 'echo', arguments: args }] } };
  const result = { content: canonicalJson(args), isError: false };

  it('the same long run is the same span wherever it appears, escaped or not, and each document reassembles exactly', () => {
    const docs = [response, { tool: 'echo', arguments: args }, result].map((d) => Buffer.from(canonicalJson(d), 'utf8'));
    const papers = docs.map((bytes) => spannedPaper({ kind: 'artefact', name: 'n', schemaId: 's', bytes }));
    const spans = papers.map((p) => p.blocks!.map((b) => b.hash));
    expect(spans).toEqual([[contentHash(Buffer.from(text))], [contentHash(Buffer.from(text))], [contentHash(Buffer.from(text))]]);
    const blocks = stored(papers.flatMap((p) => p.blocks!));
    papers.forEach((p, i) => {
      expect(p.layout).toBe('spans.v1');
      expect(p.contentHash).toBe(contentHash(docs[i]!));
      expect(p.bytes.length).toBeLessThan(300);
      expect(reassembleSpans(p.bytes, blocks).equals(docs[i]!)).toBe(true);
    });
    expect(() => reassembleSpans(papers[0]!.bytes, new Map())).toThrow(HistoryBlockMissing);
  });

  it('cuts every document where the definition says: maximal runs of at least SPAN_MIN_BYTES bytes with neither a quote nor a backslash', () => {
    // The definition, byte by byte: the runs between cuts, each a span when long enough.
    const expected = (bytes: Buffer): string[] => {
      const runs: string[] = [];
      let from = 0;
      for (let i = 0; i <= bytes.length; i++) {
        if (i === bytes.length || bytes[i] === 0x22 || bytes[i] === 0x5c) {
          if (i - from >= SPAN_MIN_BYTES) runs.push(bytes.subarray(from, i).toString('latin1'));
          from = i + 1;
        }
      }
      return runs;
    };
    let seed = 7;
    const next = (n: number) => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
    for (let doc = 0; doc < 300; doc++) {
      // Runs around the threshold (and far from it), separated by one or more cut bytes, with
      // cuts at the very start and end of some documents.
      const chunks: string[] = [];
      for (let k = next(6); k >= 0; k--) {
        const len = [0, 1, SPAN_MIN_BYTES - 1, SPAN_MIN_BYTES, SPAN_MIN_BYTES + 1, 2048, next(1200)][next(7)]!;
        chunks.push((next(3) === 0 ? 'xé' : 'x').repeat(len).slice(0, len), ['"', '\\', '"\\', '\\"', '""'][next(5)]!);
      }
      if (next(2) === 0) chunks.pop();
      const bytes = Buffer.from(chunks.join(''), 'utf8');
      const got = spansOf(bytes);
      const want = expected(bytes);
      expect(got?.spans.map((b) => b.bytes.toString('latin1')) ?? [], `document ${doc}`).toEqual(want);
      if (got === null) continue;
      expect(got.spans.every((b) => b.hash === contentHash(b.bytes) && b.prev === null)).toBe(true);
      expect(reassembleSpans(got.manifest, stored(got.spans)).equals(bytes), `document ${doc} reassembles`).toBe(true);
    }
  });

  it('a document without a long run is stored as it is; a conversation block with one is stored as spans', () => {
    const small = Buffer.from('{"a":"short"}');
    expect(spansOf(small)).toBeNull();
    expect(spannedPaper({ kind: 'artefact', name: 'n', schemaId: 's', bytes: small }).layout).toBeUndefined();
    const items = chainOf([canonicalJson({ role: 'tool', content: canonicalJson(args) })]);
    const paper = manifestPaper({ kind: 'artefact', name: 'n', schemaId: 's', before: '[', items, after: ']' });
    expect(paper.blocks!.map((b) => b.layout ?? null)).toEqual(['spans.v1', null]);
    expect(reassemble(parseManifest(paper.bytes)!, stored(paper.blocks!)).equals(documentBytes('[', items, ']'))).toBe(true);
  });
});

describe('stored blocks', () => {
  const tools = `],"tools":${canonicalJson(Array.from({ length: 20 }, (_, i) => ({ name: `t${i}`, inputSchema: { type: 'object' } })))}}`;
  const paper = (turn: string) => manifestPaper({ kind: 'artefact', name: turn, schemaId: 's', before, items: chainOf([turn]), after: tools, tail: true });
  const tailOf = (blocks: readonly HistoryBlock[] | undefined) => blocks?.filter((b) => b.prev === null && b.bytes.toString() === tools) ?? [];

  it('leaves out only the content-keyed blocks committed for the same case; link blocks always travel', () => {
    const stored = new StoredBlocks();
    const first = paper('"one"');
    expect(tailOf(stored.strip('case-a', [first])[0]!.blocks)).toHaveLength(1);
    stored.committed('case-a', [first]);
    const next = stored.strip('case-a', [paper('"two"')])[0]!;
    expect(tailOf(next.blocks)).toHaveLength(0);
    expect(next.blocks!.some((b) => b.prev !== null || b.bytes.toString() === '"two"')).toBe(true);
    expect(tailOf(stored.strip('case-b', [paper('"two"')])[0]!.blocks)).toHaveLength(1);
  });

  it('forgets the least recently committed first, so a forgotten block is carried again', () => {
    const stored = new StoredBlocks(4); // each paper here commits two content-keyed blocks: its first message (no prev) and the tail
    stored.committed('case-a', [paper('"one"')]);
    stored.committed('case-b', [paper('"one"')]);
    stored.committed('case-a', [paper('"two"')]); // refreshes case-a's tail
    stored.committed('case-c', [paper('"one"')]);
    expect(tailOf(stored.strip('case-a', [paper('"x"')])[0]!.blocks)).toHaveLength(0);
    expect(tailOf(stored.strip('case-b', [paper('"x"')])[0]!.blocks)).toHaveLength(1);
  });
});

