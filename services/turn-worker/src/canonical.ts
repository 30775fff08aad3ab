/**
 * RFC 8785 canonical JSON of the two documents every turn writes — the model request and the
 * runtime state — built from cached pieces: a message's canonical form never changes (messages
 * are immutable and shared from state to state), and a registry's tool schemas are the same for
 * every request of an agent. The result is byte-identical to `canonicalJson` of the whole
 * document (the unit tests compare them); only the work is not repeated every turn.
 */
import { createHash, randomUUID, type Hash } from 'node:crypto';
import { canonicalJson, ownedUtf8 } from '@everdict/contracts';
import type { ChatMessage, ModelRequest, RouteIdentity } from '@everdict/llm';
import { HistoryChain } from '@everdict/store';
import type { HistoryItem } from '@everdict/store';

const toolForms = new WeakMap<object, string>();

/** Canonical JSON of a tool list, cached on `owner` (e.g. the agent's registry). */
export function canonicalTools(owner: object, tools: ModelRequest['tools']): string {
  let form = toolForms.get(owner);
  if (form === undefined) {
    form = canonicalJson(tools);
    toolForms.set(owner, form);
  }
  return form;
}

const SENTINEL = `everdict-messages-${randomUUID()}`;

/**
 * The conversation as content-addressed history (libs/store history.ts): each message's
 * canonical bytes and link are computed once per process, and a request or state paper is a
 * manifest around them. Scoped per task: a message object is only ever one task's.
 */
const conversation = new HistoryChain();
const messageForm = (m: object) => canonicalJson(m);

/** The history items of a task's message list (cached per message object). */
export function messageItems(taskId: string, messages: readonly ChatMessage[]): HistoryItem[] {
  return conversation.items(taskId, messages, messageForm);
}

/** Σ weigh(item) over a task's message list, kept with its chain: a turn weighs only the messages it added. */
export function messagesWeight(taskId: string, messages: readonly ChatMessage[], weigh: (item: HistoryItem) => number): number {
  return conversation.total(taskId, messages, messageForm, weigh);
}

/** Records that the blocks of `messages` are stored (restored from, or committed with, a checkpoint). */
export function markMessagesDurable(taskId: string, messages: readonly ChatMessage[]): void {
  conversation.markDurable(taskId, messages, messageForm);
}

/** A document split around its message list: `before + items.join(',') + after`, with its hash. */
export interface SplicedDocument {
  readonly before: string;
  readonly items: readonly HistoryItem[];
  readonly after: string;
  readonly hash: string;
}

/**
 * The journalled model request document `{ route, request }` split around its messages (the
 * same bytes as `canonicalRequestDoc`), or null when the request has a field the splice does not
 * know (the caller then stores it whole).
 */
export function requestDocument(taskId: string, route: RouteIdentity, request: ModelRequest, toolsOwner: object): SplicedDocument | null {
  if (Object.keys(request).some((k) => !REQUEST_KEYS.has(k))) return null;
  const max = request.maxOutputTokens === undefined ? '' : `"maxOutputTokens":${canonicalJson(request.maxOutputTokens)},`;
  const before = `{"request":{${max}"messages":[`;
  const after = requestSuffix(toolsOwner, request, route);
  const items = messageItems(taskId, request.messages);
  return { before, items, after: after.text, hash: runningHash(requestHashes, before, request.messages, items, after.bytes) };
}

/**
 * The request's bytes after its messages — system prompt, tool schemas and route, several KB —
 * kept per tools owner (an agent's registry) while prompt and route stay the same: every turn of
 * the agent then hashes and names the same string and bytes instead of building, flattening and
 * encoding them again (profiled at peak: about 3 % of a worker's CPU, with the bench's short prompt).
 */
const suffixes = new WeakMap<object, { readonly system: string | null; readonly route: string; readonly text: string; readonly bytes: Buffer }>();

function requestSuffix(toolsOwner: object, request: ModelRequest, route: RouteIdentity): { readonly text: string; readonly bytes: Buffer } {
  const routeText = canonicalJson(route);
  const kept = suffixes.get(toolsOwner);
  if (kept !== undefined && kept.system === request.system && kept.route === routeText) return kept;
  const text = `],"system":${canonicalJson(request.system)},"tools":${canonicalTools(toolsOwner, request.tools)}},"route":${routeText}}`;
  const made = { system: request.system, route: routeText, text, bytes: ownedUtf8(text) };
  suffixes.set(toolsOwner, made);
  return made;
}

/**
 * The running sha256 of a document's bytes up to its last message, kept on that message: the
 * next turn's document of the same kind starts with the same bytes (same `before`, same
 * messages — the last message's link hash commits to the whole prefix), so its hash continues
 * from there and only the appended messages and the suffix are hashed. One map per kind of
 * document (request, state): the two end their conversations at different messages.
 */
type RunningHashes = WeakMap<object, { readonly before: string; readonly link: string; readonly state: Hash }>;
const requestHashes: RunningHashes = new WeakMap();
const stateHashes: RunningHashes = new WeakMap();

function runningHash(hashes: RunningHashes, before: string, keys: readonly object[], items: readonly HistoryItem[], after: string | Buffer): string {
  let from = 0;
  let state: Hash | null = null;
  for (let i = items.length - 1; i >= 0 && state === null; i--) {
    const r = hashes.get(keys[i]!);
    if (r !== undefined && r.before === before && r.link === items[i]!.hash) {
      // Taken, not copied: the entry is dropped (one running state per conversation moves on).
      state = r.state;
      from = i + 1;
      hashes.delete(keys[i]!);
    }
  }
  state ??= createHash('sha256').update(before);
  for (let i = from; i < items.length; i++) {
    if (i > 0) state.update(',');
    state.update(items[i]!.bytes);
  }
  if (items.length > 0) hashes.set(keys[items.length - 1]!, { before, link: items[items.length - 1]!.hash, state: state.copy() });
  return `sha256:${state.update(after).digest('hex')}`;
}

const REQUEST_KEYS = new Set(['system', 'messages', 'tools', 'maxOutputTokens']);

/**
 * A runtime-state document (v2: its conversation is the top-level `chat`) split around its
 * messages; null if it cannot be. `chat` sorts right after `caseId`, so `before` is the same
 * for every checkpoint of a task and the state hash runs on like a request's.
 */
export function stateDocumentSplice<T extends { taskId: string; chat: readonly ChatMessage[] }>(doc: T): SplicedDocument | null {
  // The shell's top-level keys in canonical order (canonicalJson writes sorted subtrees in one pass).
  const fields: Record<string, unknown> = {};
  for (const key of Object.keys(doc).sort()) fields[key] = key === 'chat' ? SENTINEL : doc[key as keyof T];
  const shell = canonicalJson(fields);
  const at = shell.indexOf(`"${SENTINEL}"`);
  if (at < 0 || shell.indexOf(`"${SENTINEL}"`, at + 1) >= 0) return null;
  const before = `${shell.slice(0, at)}[`;
  const after = `]${shell.slice(at + SENTINEL.length + 2)}`;
  const items = messageItems(doc.taskId, doc.chat);
  return { before, items, after, hash: runningHash(stateHashes, before, doc.chat, items, after) };
}
