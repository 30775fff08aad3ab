/**
 * Turning one model reply into ONE action document (DESIGN §5 step 5). The whole document is
 * validated before anything runs: arguments that are not JSON, a document the schema rejects,
 * an unregistered tool, or arguments a tool's schema rejects make the document invalid, and
 * then NOTHING in it executes. Every call still gets a typed outcome the model can act on, and
 * is journalled with it like any other call.
 */
import { describeViolations, schemaValidator, schemaViolations, type ActionDocument, type KernelRefusal, type ToolCallAction } from '@everdict/contracts';
import type { ModelOutput } from '@everdict/llm';
import type { ToolRegistry } from './registry.js';

export type ActionProblemKind = 'not_json' | 'schema' | 'unregistered_tool' | 'invalid_arguments';

export interface ActionProblem {
  /** The model's correlation id of the offending call, or null for a document-level problem. */
  readonly callId: string | null;
  readonly kind: ActionProblemKind;
  readonly detail: string;
}

type DecodedActions =
  | { readonly ok: true; readonly document: ActionDocument }
  | {
      readonly ok: false;
      readonly problems: readonly ActionProblem[];
      /**
       * The calls as the model sent them, in its order (arguments null when not JSON): what each
       * withheld call's journal row records as its request.
       */
      readonly actions: readonly ToolCallAction[];
    };

/** The refusal each problem is reported with. */
export const PROBLEM_REFUSAL: Readonly<Record<ActionProblemKind, KernelRefusal>> = {
  not_json: 'invalid_action_document',
  schema: 'invalid_action_document',
  unregistered_tool: 'unregistered_tool',
  invalid_arguments: 'invalid_arguments',
};

const validateDocument = schemaValidator('action-document.schema.json');

export function decodeActionDocument(output: ModelOutput, registry: ToolRegistry): DecodedActions {
  const problems: ActionProblem[] = [];
  const actions = output.toolCalls.map((call) => {
    let args: unknown;
    try {
      args = JSON.parse(call.argumentsText);
    } catch {
      problems.push({ callId: call.callId, kind: 'not_json', detail: 'arguments are not JSON' });
      args = null;
    }
    return { kind: 'tool_call' as const, callId: call.callId, tool: call.name, arguments: args };
  });
  const candidate = { text: output.text, actions };
  const seen = new Set<string>();
  for (const a of actions) {
    if (seen.has(a.callId)) problems.push({ callId: a.callId, kind: 'schema', detail: 'callId is used twice in one response' });
    seen.add(a.callId);
  }
  if (problems.length === 0 && !validateDocument(candidate)) {
    const violations = schemaViolations(validateDocument.errors);
    // Pin each violation on its call when the path says which one.
    for (const v of violations) {
      const m = /^\/actions\/(\d+)/.exec(v.path);
      const call = m ? actions[Number(m[1])] : undefined;
      problems.push({ callId: call?.callId ?? null, kind: 'schema', detail: describeViolations([v]) });
    }
  }
  for (const a of actions) {
    if (problems.some((p) => p.callId === a.callId)) continue;
    if (registry.descriptor(a.tool) === undefined) {
      problems.push({ callId: a.callId, kind: 'unregistered_tool', detail: `tool ${JSON.stringify(a.tool.slice(0, 64))} is not registered` });
      continue;
    }
    const argProblems = registry.argumentProblems(a.tool, a.arguments);
    if (argProblems.length > 0) problems.push({ callId: a.callId, kind: 'invalid_arguments', detail: argProblems.slice(0, 5).join('; ') });
  }
  if (problems.length > 0) return { ok: false, problems, actions: actions as ToolCallAction[] };
  return { ok: true, document: candidate as ActionDocument };
}
