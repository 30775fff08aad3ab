/**
 * Content-addressed conversation history (migration 0018): a document that embeds a long list of
 * items (a model request's messages, a runtime state's messages) is stored as a small MANIFEST
 * — its bytes before the list, after it, the list's length and its chain head — and each item's
 * bytes are stored once per case as a history block.
 *
 * Invariants:
 * - the document is exactly `before + items.join(',') + after`; its sha256 is the paper's
 *   content hash (so a call's request hash is the hash of the exact bytes sent, a checkpoint's
 *   state hash the hash of the exact state restored), and every reader re-verifies it after
 *   reassembly (`paper_document()` in SQL, `reassemble` here);
 * - a block's key is its link hash, sha256 of (the previous item's link, '\n', the item's bytes):
 *   the head names the whole ordered list, and a list extending another shares its blocks, so a
 *   turn writes only the blocks of the items it appended (`HistoryItem.durable` says which are
 *   already stored);
 * - blocks ride in the same statement as the manifest that references them (`NewPaper.blocks`),
 *   so a manifest is never durable without its blocks;
 * - a long run of bytes (a tool call's arguments and result) is stored once per case as a span
 *   block, named by spans manifests of the call papers and conversation blocks that hold it
 *   (migration 0022, `spansOf` below); the same hashes and verification apply.
 * Pure functions; the chain cache holds canonical forms only, never decides what is durable by
 * itself (the caller marks a list durable once the write that carried it committed).
 */
import { createHash } from 'node:crypto';
import { canonicalJson, newId, ownedUtf8 } from '@everdict/contracts';
import { contentHash } from './journal.js';
import type { NewPaper } from './sql/journal.js';

export const HISTORY_MANIFEST_LAYOUT = 'history-manifest.v1';
export const SPANS_LAYOUT = 'spans.v1';

/** One block of a chain: its link hash, the link before it (null: first), the item's bytes. */
export interface HistoryBlock {
  readonly hash: string;
  readonly prev: string | null;
  /** The stored bytes: the item's own, or (layout 'spans.v1') its spans manifest. */
  readonly bytes: Buffer;
  /** 'spans.v1' (migration 0022): `bytes` is a spans manifest over span blocks. Absent: raw. */
  readonly layout?: typeof SPANS_LAYOUT;
}

/** An item of a list as the chain sees it. */
export interface HistoryItem extends HistoryBlock {
  /** Whether this block is known to be stored (a committed write carried it). */
  readonly durable: boolean;
}

export interface HistoryManifest {
  readonly layout: typeof HISTORY_MANIFEST_LAYOUT;
  readonly before: string;
  /** The bytes after the list ('' when they are the `tail` block). */
  readonly after: string;
  readonly count: number;
  /** The last item's link hash (null: an empty list). */
  readonly head: string | null;
  /** A long suffix stored as a block of its own (keyed by contentHash of its bytes, no prev). */
  readonly tail?: string;
}

/** A suffix at least this long is stored as a `tail` block (it repeats every turn: a request's tool schemas). */
export const TAIL_BLOCK_MIN_BYTES = 512;

/** The link hash of an item after `prev` (null: the first item). */
export function linkHash(prev: string | null, bytes: Buffer): string {
  return `sha256:${createHash('sha256')
    .update(prev ?? '')
    .update('\n')
    .update(bytes)
    .digest('hex')}`;
}

/** The chain of a list of canonical item forms, computed from scratch (nothing is durable). */
export function chainOf(forms: readonly string[]): HistoryItem[] {
  const out: HistoryItem[] = [];
  let prev: string | null = null;
  for (const form of forms) {
    const bytes = ownedUtf8(form);
    const hash = linkHash(prev, bytes);
    out.push({ hash, prev, bytes, durable: false });
    prev = hash;
  }
  return out;
}

/** sha256 (`sha256:` hex) of the document `before + items.join(',') + after`, without joining it. */
export function documentHash(before: string, items: readonly { readonly bytes: Buffer }[], after: string): string {
  const h = createHash('sha256').update(before);
  items.forEach((it, i) => {
    if (i > 0) h.update(',');
    h.update(it.bytes);
  });
  return `sha256:${h.update(after).digest('hex')}`;
}

/** The document's exact bytes. */
export function documentBytes(before: string, items: readonly { readonly bytes: Buffer }[], after: string): Buffer {
  const parts: Buffer[] = [Buffer.from(before, 'utf8')];
  items.forEach((it, i) => {
    if (i > 0) parts.push(Buffer.from(','));
    parts.push(it.bytes);
  });
  parts.push(Buffer.from(after, 'utf8'));
  return Buffer.concat(parts);
}

/** Recent tail blocks by their text: every agent of a profile sends the same suffix every turn. */
const tails = new Map<string, HistoryBlock>();
const TAILS_KEPT = 256;

/** The block a long suffix is stored as (null: it stays inline in the manifest). */
export function tailBlock(after: string): HistoryBlock | null {
  if (after.length < TAIL_BLOCK_MIN_BYTES && Buffer.byteLength(after, 'utf8') < TAIL_BLOCK_MIN_BYTES) return null;
  const known = tails.get(after);
  if (known !== undefined) return known;
  const bytes = ownedUtf8(after);
  const block = { hash: contentHash(bytes), prev: null, bytes };
  if (tails.size >= TAILS_KEPT) tails.delete(tails.keys().next().value!);
  tails.set(after, block);
  return block;
}

export function manifestOf(before: string, items: readonly HistoryBlock[], after: string, tail: HistoryBlock | null = null): HistoryManifest {
  const head = items.length === 0 ? null : items[items.length - 1]!.hash;
  // Keys in canonical order: canonicalJson then writes it in one native pass (libs/contracts jcs.ts).
  return tail === null ? { after, before, count: items.length, head, layout: HISTORY_MANIFEST_LAYOUT } : { after: '', before, count: items.length, head, layout: HISTORY_MANIFEST_LAYOUT, tail: tail.hash };
}

/**
 * A new paper whose bytes are the manifest of `before + items + after`, carrying the blocks not
 * yet durable. `tail`: store a long `after` as a block (for a suffix that repeats unchanged from
 * one paper to the next; one that changes every time stays inline). `hash`, when the caller computed it already, must be `documentHash` of the same
 * parts (it is the paper's content hash).
 */
export function manifestPaper(p: { kind: string; name: string; schemaId: string; before: string; items: readonly HistoryItem[]; after: string; hash?: string; tail?: boolean }): NewPaper {
  const tail = p.tail === true ? tailBlock(p.after) : null;
  const manifest = manifestOf(p.before, p.items, p.after, tail);
  const appended = p.items.filter((it) => !it.durable).flatMap((it) => spannedBlock(it));
  return {
    id: newId(),
    kind: p.kind,
    name: p.name,
    schemaId: p.schemaId,
    contentHash: p.hash ?? documentHash(p.before, p.items, p.after),
    bytes: Buffer.from(canonicalJson(manifest), 'utf8'),
    layout: HISTORY_MANIFEST_LAYOUT,
    // The tail goes with every manifest that names it (it is one row per case: the statement
    // keeps the stored one).
    blocks: tail === null ? appended : [...appended, tail],
  };
}

/** Why a manifest could not be reassembled: a block it names is not stored. */
export class HistoryBlockMissing extends Error {
  constructor(readonly hash: string) {
    super(`history block ${hash} is missing`);
  }
}

/** Parses manifest bytes; null when they are not a manifest (a reader then sees altered bytes). */
export function parseManifest(bytes: Buffer): HistoryManifest | null {
  try {
    const m = JSON.parse(bytes.toString('utf8')) as Partial<HistoryManifest>;
    if (m.layout !== HISTORY_MANIFEST_LAYOUT || typeof m.before !== 'string' || typeof m.after !== 'string' || !Number.isSafeInteger(m.count) || (m.head !== null && typeof m.head !== 'string')) return null;
    if (m.tail !== undefined && typeof m.tail !== 'string') return null;
    return m as HistoryManifest;
  } catch {
    return null;
  }
}

/**
 * The document of a manifest from its case's blocks (the TypeScript twin of `paper_document()`):
 * walks the chain from the head back `count` blocks. Throws HistoryBlockMissing when a block is
 * not there. The caller verifies the result against the recorded content hash.
 */
export function reassemble(manifest: HistoryManifest, blocks: ReadonlyMap<string, StoredBlock>): Buffer {
  const items: { bytes: Buffer }[] = [];
  let at = manifest.head;
  for (let i = 0; i < manifest.count; i++) {
    if (at === null) throw new HistoryBlockMissing('(chain ended early)');
    const b = blocks.get(at);
    if (b === undefined) throw new HistoryBlockMissing(at);
    items.push({ bytes: b.layout === SPANS_LAYOUT ? reassembleSpans(b.bytes, blocks) : b.bytes });
    at = b.prev;
  }
  let after = manifest.after;
  if (manifest.tail !== undefined) {
    const tail = blocks.get(manifest.tail);
    if (tail === undefined) throw new HistoryBlockMissing(manifest.tail);
    after = tail.bytes.toString('utf8');
  }
  return documentBytes(manifest.before, items.reverse(), after);
}

/** A stored block as a reader sees it (history_blocks row). */
export interface StoredBlock {
  readonly prev: string | null;
  readonly bytes: Buffer;
  readonly layout?: typeof SPANS_LAYOUT | null;
}

// ------------------------------------------------------------------ spans (migration 0022)
//
// A long run of bytes recurs verbatim in several documents of one turn: a tool call's 2 KB
// arguments are in the model's response, the tool's request, the tool's result (escaped: the
// run between escapes is the same), the assistant message and the tool-result message. Each
// such run is stored ONCE per case as a span block keyed by the plain sha256 of its bytes (no
// `prev`), and a document holding it is stored as a spans manifest
// `{"layout":"spans.v1","parts":[inline, span hash, inline, …, inline]}` (odd positions,
// counting from 1, are inline text; even ones span hashes). The document is the parts
// concatenated; a paper's content hash stays the sha256 of the whole document and every reader
// re-verifies it after reassembly (`paper_document()` / `spans_document()` in SQL).
//
// A span is a maximal run of at least SPAN_MIN_BYTES bytes containing neither '"' nor '\': the
// cut points are ASCII, so every inline part is valid UTF-8, and the same text is cut the same
// way wherever it appears (content-defined, independent of the surrounding document). A span
// key cannot collide with a link hash: link inputs contain '\n' and canonical JSON bytes never
// contain a raw newline.

/** A run shorter than this stays inline (a manifest entry costs ~80 bytes). */
export const SPAN_MIN_BYTES = 512;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** A run this long without a cut is searched to its end by the native `indexOf` (spansOf). */
const NATIVE_SCAN_AFTER = 32;

/**
 * The spans manifest of `bytes` and its span blocks; null when the bytes have no span (stored raw).
 * The bytes are read one by one while the runs are short (JSON keys and small values, where a
 * native call per cut costs more than the bytes), and a run that has gone NATIVE_SCAN_AFTER bytes
 * without a cut is skipped to its end by `indexOf`. Measured on Node.js 24, a document with a
 * 2 KB tool text: 3.4–4.6 µs against 7.3–9.7 byte by byte (the turn's tool request, result and
 * response, and its two messages, are such documents); a quote-dense 1 KB document: 1.7–1.8 µs
 * against 1.2–1.3 byte by byte, and 6.5–7.5 with `indexOf` at every cut. A span block's bytes
 * are a view of `bytes`, not a copy: the write copies them into its statement, and no block
 * outlives the document it came from.
 */
export function spansOf(bytes: Buffer): { readonly manifest: Buffer; readonly spans: HistoryBlock[] } | null {
  const parts: string[] = [];
  const spans: HistoryBlock[] = [];
  let inlineFrom = 0;
  let runFrom = 0;
  const close = (end: number) => {
    if (end - runFrom >= SPAN_MIN_BYTES) {
      const span = bytes.subarray(runFrom, end);
      const hash = contentHash(span);
      parts.push(bytes.subarray(inlineFrom, runFrom).toString('utf8'), hash);
      spans.push({ hash, prev: null, bytes: span });
      inlineFrom = end;
    }
  };
  const n = bytes.length;
  let i = 0;
  while (i < n) {
    const c = bytes[i]!;
    if (c === QUOTE || c === BACKSLASH) {
      close(i);
      runFrom = ++i;
    } else if (i - runFrom === NATIVE_SCAN_AFTER) {
      // A long run: jump to its end, the nearer of the next '"' and '\' (or the end of the bytes).
      const quote = bytes.indexOf(QUOTE, i);
      const backslash = bytes.indexOf(BACKSLASH, i);
      i = quote < 0 ? (backslash < 0 ? n : backslash) : backslash < 0 ? quote : Math.min(quote, backslash);
    } else {
      i++;
    }
  }
  close(n);
  if (spans.length === 0) return null;
  parts.push(bytes.subarray(inlineFrom).toString('utf8'));
  return { manifest: Buffer.from(canonicalJson({ layout: SPANS_LAYOUT, parts }), 'utf8'), spans };
}

/** A history block as stored: its spans manifest with its span blocks when it has spans, else itself. */
function spannedBlock(it: HistoryBlock): HistoryBlock[] {
  const s = spansOf(it.bytes);
  if (s === null) return [{ hash: it.hash, prev: it.prev, bytes: it.bytes }];
  return [{ hash: it.hash, prev: it.prev, bytes: s.manifest, layout: SPANS_LAYOUT }, ...s.spans];
}

/**
 * A new paper of `bytes` (a call's request or response document): a spans manifest carrying its
 * span blocks when the bytes hold a span, else the bytes themselves. Either way its content hash
 * is the sha256 of `bytes`.
 */
export function spannedPaper(p: { kind: string; name: string; schemaId: string; bytes: Buffer }): NewPaper {
  const s = spansOf(p.bytes);
  const base = { id: newId(), kind: p.kind, name: p.name, schemaId: p.schemaId, contentHash: contentHash(p.bytes) };
  return s === null ? { ...base, bytes: p.bytes } : { ...base, bytes: s.manifest, layout: SPANS_LAYOUT, blocks: s.spans };
}

/** The document of a spans manifest (the TypeScript twin of `spans_document()`); throws HistoryBlockMissing. */
export function reassembleSpans(manifest: Buffer, blocks: ReadonlyMap<string, StoredBlock>): Buffer {
  let parts: unknown;
  try {
    parts = (JSON.parse(manifest.toString('utf8')) as { parts?: unknown }).parts;
  } catch {
    return manifest;
  }
  if (!Array.isArray(parts)) return manifest;
  return Buffer.concat(
    parts.map((p, i) => {
      if (i % 2 === 0) return Buffer.from(String(p), 'utf8');
      const b = blocks.get(String(p));
      if (b === undefined || (b.layout ?? null) !== null) throw new HistoryBlockMissing(String(p));
      return b.bytes;
    }),
  );
}

interface Link {
  readonly scope: string;
  readonly prevKey: object | null;
  readonly item: HistoryItem;
}

/**
 * The chains of the lists a process builds documents from, cached per item OBJECT (list items —
 * chat messages — are immutable and shared from one list to the next): an item's canonical form
 * and link are computed once, not once per document. An entry is reused only if the item has the
 * same predecessor object and link in the same scope (e.g. a task), so a list that was cut
 * (compaction) or is another task's gets chains of its own.
 *
 * A turn asks for the chain of the same conversation several times (its size, its request, its
 * state, then marks it durable), each a few messages longer than the last; so the last chain of
 * each conversation is kept on its last item (`lists`), and a list that extends it (the same
 * item objects in the same order, compared by identity) reuses it and links only the appended
 * items. A kept chain's `durable` flags can only lag the links' (an item's link is the same for
 * the same predecessors, and only ever becomes durable), which at worst re-carries a block.
 */
export class HistoryChain {
  private readonly links = new WeakMap<object, Link>();
  private readonly lists = new WeakMap<object, ChainMemo>();

  /** The chain of `keys` in `scope`; `form` gives an item's canonical JSON when it is not cached. */
  items(scope: string, keys: readonly object[], form: (key: object) => string): HistoryItem[] {
    return this.chain(scope, keys, form).items.slice();
  }

  /**
   * Σ weigh(item) over the chain of `keys` (e.g. a context's size), kept with the chain: a list
   * that extends the kept one weighs only the items it appended, so a turn's cost does not grow
   * with its history. One `weigh` function (by identity) is remembered per chain.
   */
  total(scope: string, keys: readonly object[], form: (key: object) => string, weigh: (item: HistoryItem) => number): number {
    const memo = this.chain(scope, keys, form);
    const kept = memo.sum !== undefined && memo.sum.weigh === weigh ? memo.sum : { weigh, upTo: 0, total: 0 };
    let total = kept.total;
    for (let i = kept.upTo; i < memo.items.length; i++) total += weigh(memo.items[i]!);
    memo.sum = { weigh, upTo: memo.items.length, total };
    return total;
  }

  /** Marks the chain of `keys` as stored (a committed write carried it, or it was restored). */
  markDurable(scope: string, keys: readonly object[], form: (key: object) => string): void {
    const memo = this.chain(scope, keys, form);
    const items = memo.items;
    for (let i = memo.durable; i < items.length; i++) {
      if (items[i]!.durable) continue;
      const item = { ...items[i]!, durable: true };
      items[i] = item;
      this.links.set(keys[i]!, { scope, prevKey: i === 0 ? null : keys[i - 1]!, item });
    }
    memo.durable = items.length;
  }

  /** The kept chain of exactly `keys`, extended from the kept chain of a prefix of it when there is one. */
  private chain(scope: string, keys: readonly object[], form: (key: object) => string): ChainMemo {
    let from = 0;
    let base: ChainMemo | undefined;
    for (let j = keys.length - 1; j >= 0 && j >= keys.length - MEMO_LOOKBACK; j--) {
      const m = this.lists.get(keys[j]!);
      if (m !== undefined && m.scope === scope && m.keys.length === j + 1 && samePrefix(m.keys, keys, j + 1)) {
        base = m;
        from = j + 1;
        break;
      }
    }
    if (base !== undefined && from === keys.length) return base;
    const items: HistoryItem[] = base === undefined ? [] : base.items.slice();
    let prev: string | null = from === 0 ? null : items[from - 1]!.hash;
    for (let i = from; i < keys.length; i++) {
      const key = keys[i]!;
      const prevKey = i === 0 ? null : keys[i - 1]!;
      let link = this.links.get(key);
      if (link === undefined || link.scope !== scope || link.prevKey !== prevKey || link.item.prev !== prev) {
        const bytes = link !== undefined ? link.item.bytes : ownedUtf8(form(key));
        link = { scope, prevKey, item: { hash: linkHash(prev, bytes), prev, bytes, durable: false } };
        this.links.set(key, link);
      }
      items.push(link.item);
      prev = link.item.hash;
    }
    // The base's sum covers items it shares with this chain (its whole list is this one's prefix).
    const memo: ChainMemo = { scope, keys, items, durable: base === undefined ? 0 : Math.min(base.durable, from), sum: base?.sum };
    if (keys.length > 0) {
      // One kept chain per conversation: the one it extended is superseded.
      if (base !== undefined) this.lists.delete(base.keys[base.keys.length - 1]!);
      this.lists.set(keys[keys.length - 1]!, memo);
    }
    return memo;
  }
}

/** A conversation's last chain: `items` is the chain of `keys`; items before `durable` are known stored. */
interface ChainMemo {
  readonly scope: string;
  readonly keys: readonly object[];
  readonly items: HistoryItem[];
  durable: number;
  /** HistoryChain.total's running sum: `total` is Σ weigh over items[0, upTo). */
  sum: { readonly weigh: (item: HistoryItem) => number; readonly upTo: number; readonly total: number } | undefined;
}

/** How far back from a list's end a kept chain is looked for (a turn appends a few messages). */
const MEMO_LOOKBACK = 32;

function samePrefix(a: readonly object[], b: readonly object[], n: number): boolean {
  if (a === b) return true;
  for (let i = n - 1; i >= 0; i--) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Content-keyed blocks (no `prev`: a request's tail, span blocks) this process saw committed,
 * per case, so a later write of the same case names them without carrying them again — a
 * request's tail (prompt, tool schemas) repeats unchanged every turn of an agent, and at a few
 * KB it was the largest part of a turn's write. Link blocks are not kept here: the chain's
 * `durable` flag covers them.
 *
 * Invariant: a block is added only after the write that carried it committed (never on a stale
 * or rolled-back part), so a manifest that omits it names a row that is in the database, or one
 * whose deferred commit precedes it in the WAL (lost only together with it). Bounded: the oldest
 * entries are forgotten first, which only makes a write carry a block again.
 */
export class StoredBlocks {
  private readonly keys = new Set<string>();

  constructor(private readonly capacity = 20_000) {}

  /** The papers with the content-keyed blocks already stored for `caseId` left out. */
  strip(caseId: string, papers: readonly NewPaper[]): readonly NewPaper[] {
    if (this.keys.size === 0 || !papers.some((p) => p.blocks?.some((b) => b.prev === null && this.keys.has(`${caseId}/${b.hash}`)))) return papers;
    return papers.map((p) => (p.blocks === undefined ? p : { ...p, blocks: p.blocks.filter((b) => b.prev !== null || !this.keys.has(`${caseId}/${b.hash}`)) }));
  }

  /** Records the content-keyed blocks of a committed write of `caseId`. */
  committed(caseId: string, papers: readonly NewPaper[]): void {
    for (const p of papers) {
      for (const b of p.blocks ?? []) {
        if (b.prev !== null) continue;
        const key = `${caseId}/${b.hash}`;
        this.keys.delete(key);
        this.keys.add(key);
      }
    }
    // A Set iterates in insertion order: the first keys are the least recently committed.
    for (const k of this.keys) {
      if (this.keys.size <= this.capacity) break;
      this.keys.delete(k);
    }
  }
}
