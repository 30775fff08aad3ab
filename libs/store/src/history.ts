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
 *   so a manifest is never durable without its blocks.
 * Pure functions; the chain cache holds canonical forms only, never decides what is durable by
 * itself (the caller marks a list durable once the write that carried it committed).
 */
import { createHash } from 'node:crypto';
import { canonicalJson, newId } from '@everdict/contracts';
import type { NewPaper } from './sql/journal.js';

export const HISTORY_MANIFEST_LAYOUT = 'history-manifest.v1';

/** One block of a chain: its link hash, the link before it (null: first), the item's bytes. */
export interface HistoryBlock {
  readonly hash: string;
  readonly prev: string | null;
  readonly bytes: Buffer;
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
    const bytes = Buffer.from(form, 'utf8');
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

/** The block a long suffix is stored as (null: it stays inline in the manifest). */
export function tailBlock(after: string): HistoryBlock | null {
  if (Buffer.byteLength(after, 'utf8') < TAIL_BLOCK_MIN_BYTES) return null;
  const bytes = Buffer.from(after, 'utf8');
  return { hash: `sha256:${createHash('sha256').update(bytes).digest('hex')}`, prev: null, bytes };
}

export function manifestOf(before: string, items: readonly HistoryBlock[], after: string, tail: HistoryBlock | null = null): HistoryManifest {
  const head = items.length === 0 ? null : items[items.length - 1]!.hash;
  return tail === null ? { layout: HISTORY_MANIFEST_LAYOUT, before, after, count: items.length, head } : { layout: HISTORY_MANIFEST_LAYOUT, before, after: '', count: items.length, head, tail: tail.hash };
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
  const appended = p.items.filter((it) => !it.durable).map((it) => ({ hash: it.hash, prev: it.prev, bytes: it.bytes }));
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
export function reassemble(manifest: HistoryManifest, blocks: ReadonlyMap<string, { readonly prev: string | null; readonly bytes: Buffer }>): Buffer {
  const items: { bytes: Buffer }[] = [];
  let at = manifest.head;
  for (let i = 0; i < manifest.count; i++) {
    if (at === null) throw new HistoryBlockMissing('(chain ended early)');
    const b = blocks.get(at);
    if (b === undefined) throw new HistoryBlockMissing(at);
    items.push(b);
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
 */
export class HistoryChain {
  private readonly links = new WeakMap<object, Link>();

  /** The chain of `keys` in `scope`; `form` gives an item's canonical JSON when it is not cached. */
  items(scope: string, keys: readonly object[], form: (key: object) => string): HistoryItem[] {
    const out: HistoryItem[] = new Array<HistoryItem>(keys.length);
    let prevKey: object | null = null;
    let prev: string | null = null;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      let link = this.links.get(key);
      if (link === undefined || link.scope !== scope || link.prevKey !== prevKey || link.item.prev !== prev) {
        const bytes = link !== undefined ? link.item.bytes : Buffer.from(form(key), 'utf8');
        link = { scope, prevKey, item: { hash: linkHash(prev, bytes), prev, bytes, durable: false } };
        this.links.set(key, link);
      }
      out[i] = link.item;
      prevKey = key;
      prev = link.item.hash;
    }
    return out;
  }

  /** Marks the chain of `keys` as stored (a committed write carried it, or it was restored). */
  markDurable(scope: string, keys: readonly object[], form: (key: object) => string): void {
    let prevKey: object | null = null;
    for (const [i, item] of this.items(scope, keys, form).entries()) {
      if (!item.durable) this.links.set(keys[i]!, { scope, prevKey, item: { ...item, durable: true } });
      prevKey = keys[i]!;
    }
  }
}
