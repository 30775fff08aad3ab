/**
 * RFC 8785 canonical JSON of the two documents every turn writes — the model request and the
 * runtime state — built from cached pieces: a message's canonical form never changes (messages
 * are immutable and shared from state to state), and a registry's tool schemas are the same for
 * every request of an agent. The result is byte-identical to `canonicalJson` of the whole
 * document (the unit tests compare them); only the work is not repeated every turn.
 */
import { createHash, randomUUID, type Hash } from 'node:crypto';
import { canonicalJson } from '@everdict/contracts';
import type { ChatMessage, ModelRequest, RouteIdentity } from '@everdict/llm';
import { documentHash, HistoryChain } from '@everdict/store';
import type { HistoryItem } from '@everdict/store';

const messageForms = new WeakMap<object, string>();
const toolForms = new WeakMap<object, string>();

/** Canonical JSON of a message list, each message canonicalised once per process. */
function canonicalMessages(messages: readonly ChatMessage[]): string {
  const parts = messages.map((m) => {
    let form = messageForms.get(m);
    if (form === undefined) {
      form = canonicalJson(m);
      messageForms.set(m, form);
    }
    return form;
  });
  return `[${parts.join(',')}]`;
}

/** Canonical JSON of a tool list, cached on `owner` (e.g. the agent's registry). */
export function canonicalTools(owner: object, tools: ModelRequest['tools']): string {
  let form = toolForms.get(owner);
  if (form === undefined) {
    form = canonicalJson(tools);
    toolForms.set(owner, form);
  }
  return form;
}

/**
 * Canonical JSON of the journalled model request document `{ route, request }` (the kernel's
 * request paper). Keys in RFC 8785 order: request < route; maxOutputTokens < messages < system
 * < tools.
 */
export function canonicalRequestDoc(route: RouteIdentity, request: ModelRequest, tools: string): string {
  const known = new Set(['system', 'messages', 'tools', 'maxOutputTokens']);
  if (Object.keys(request).some((k) => !known.has(k))) return canonicalJson({ route, request });
  const max = request.maxOutputTokens === undefined ? '' : `"maxOutputTokens":${canonicalJson(request.maxOutputTokens)},`;
  return `{"request":{${max}"messages":${canonicalMessages(request.messages)},"system":${canonicalJson(request.system)},"tools":${tools}},"route":${canonicalJson(route)}}`;
}

const SENTINEL = `everdict-messages-${randomUUID()}`;

/** Canonical JSON of a document whose `run.messages` is a message list (the runtime state). */
export function canonicalWithMessages<T extends { run: { messages: readonly ChatMessage[] } }>(doc: T): string {
  const shell = canonicalJson({ ...doc, run: { ...doc.run, messages: SENTINEL } });
  const at = shell.indexOf(`"${SENTINEL}"`);
  if (at < 0 || shell.indexOf(`"${SENTINEL}"`, at + 1) >= 0) return canonicalJson(doc);
  return shell.slice(0, at) + canonicalMessages(doc.run.messages) + shell.slice(at + SENTINEL.length + 2);
}

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
  const after = `],"system":${canonicalJson(request.system)},"tools":${canonicalTools(toolsOwner, request.tools)}},"route":${canonicalJson(route)}}`;
  const items = messageItems(taskId, request.messages);
  return { before, items, after, hash: runningHash(before, request.messages, items, after) };
}

/**
 * The running sha256 of a request's bytes up to its last message, kept on that message: the
 * next turn's request starts with the same bytes (same `before`, same messages — the last
 * message's link hash commits to the whole prefix), so its hash continues from there and only
 * the appended messages and the suffix are hashed.
 */
const runningHashes = new WeakMap<object, { readonly before: string; readonly link: string; readonly state: Hash }>();

function runningHash(before: string, keys: readonly object[], items: readonly HistoryItem[], after: string): string {
  let from = 0;
  let state: Hash | null = null;
  for (let i = items.length - 1; i >= 0 && state === null; i--) {
    const r = runningHashes.get(keys[i]!);
    if (r !== undefined && r.before === before && r.link === items[i]!.hash) {
      state = r.state.copy();
      from = i + 1;
      runningHashes.delete(keys[i]!); // moved on: one running state per conversation
    }
  }
  state ??= createHash('sha256').update(before);
  for (let i = from; i < items.length; i++) {
    if (i > 0) state.update(',');
    state.update(items[i]!.bytes);
  }
  if (items.length > 0) runningHashes.set(keys[items.length - 1]!, { before, link: items[items.length - 1]!.hash, state: state.copy() });
  return `sha256:${state.update(after).digest('hex')}`;
}

const REQUEST_KEYS = new Set(['system', 'messages', 'tools', 'maxOutputTokens']);

/** A document whose `run.messages` is a task's message list (the runtime state), split around it; null if it cannot be. */
export function stateDocumentSplice<T extends { taskId: string; run: { messages: readonly ChatMessage[] } }>(doc: T): SplicedDocument | null {
  const shell = canonicalJson({ ...doc, run: { ...doc.run, messages: SENTINEL } });
  const at = shell.indexOf(`"${SENTINEL}"`);
  if (at < 0 || shell.indexOf(`"${SENTINEL}"`, at + 1) >= 0) return null;
  const before = `${shell.slice(0, at)}[`;
  const after = `]${shell.slice(at + SENTINEL.length + 2)}`;
  const items = messageItems(doc.taskId, doc.run.messages);
  return { before, items, after, hash: documentHash(before, items, after) };
}
