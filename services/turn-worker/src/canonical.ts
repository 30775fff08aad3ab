/**
 * RFC 8785 canonical JSON of the two documents every turn writes — the model request and the
 * runtime state — built from cached pieces: a message's canonical form never changes (messages
 * are immutable and shared from state to state), and a registry's tool schemas are the same for
 * every request of an agent. The result is byte-identical to `canonicalJson` of the whole
 * document (the unit tests compare them); only the work is not repeated every turn.
 */
import { randomUUID } from 'node:crypto';
import { canonicalJson } from '@everdict/contracts';
import type { ChatMessage, ModelRequest, RouteIdentity } from '@everdict/llm';

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
