/**
 * Runs the calls of one action document (DESIGN §5 step 6). Each call has its id allocated
 * before any decision and is journalled under task + turn + ordinal, after passing the gates in
 * this order, each consumed verbatim from contracts:
 *   0. the document itself               — a call of a rejected document runs no further
 *   1. authorizeToolInvocation (K1/K2)   — scope; forbidden beats everything
 *   2. modeAdmitsInvocation (K7)         — shadow mode captures instead of invoking
 *   3. permissionRequired → hook (K3)    — writes and consent-requiring reads only
 * Gates 0–2 are the kernel's own decisions: a call they withhold is journalled already settled
 * (`refused` / `shadowed`) and travels with the turn's other outcomes. A call that passes them
 * is journalled as an open intent, durable before the hook is asked or the handler runs.
 * Every withheld call is reported as a tool_result with isError and its refusal (K8) and is a
 * journal row like any other. Independent declared reads run in parallel; everything else runs
 * in recorded order. A read whose connector is down (`TOOL_UNAVAILABLE`), or whose consent the
 * hook has yet to be given (`ask` → `CONSENT_PENDING`), gets no outcome: its intent stays open,
 * the calls of its batch finish, no later batch starts, and dispatch throws the failure for the
 * turn to suspend on.
 */
import {
  authorizeToolInvocation,
  callStatusForOutcome,
  CONSENT_PENDING,
  EverdictError,
  isIntrinsic,
  modeAdmitsInvocation,
  outcomeIsError,
  payloadHash,
  pendingConsentTool,
  permissionRequired,
  refusalText,
  type IntrinsicToolName,
  type KernelRefusal,
  type ToolCallAction,
  type ToolDescriptor,
  type ToolOutcome,
  unavailableConnector,
  capacityWait,
} from '@everdict/contracts';
import type { ChatMessage } from '@everdict/llm';
import { foldEffect, type IntrinsicEffect, type ToolCallRecord } from './call-record.js';
import type { KernelEvent } from './events.js';
import { runIntrinsic } from './intrinsics.js';
import type { KernelPorts } from './kernel-ports.js';
import type { RunContext, RunState } from './state.js';

interface DispatchResult {
  readonly state: RunState;
  readonly messages: ChatMessage[];
  /** Calls whose handler actually ran (counts against `maxToolCalls`). */
  readonly executed: number;
  readonly deferredChildren: number;
}

/** Why a call of a rejected action document is withheld: the refusal the model is told. */
export interface DocumentRefusal {
  readonly refusal: KernelRefusal;
  readonly detail: string;
}

interface Slot {
  readonly action: ToolCallAction;
  readonly ordinal: number;
  /** undefined only in a rejected document: the model named a tool it was not offered. */
  readonly descriptor: ToolDescriptor | undefined;
  /** Non-null: the document was rejected and this call is withheld with this answer. */
  readonly rejected: DocumentRefusal | null;
}

// Keys in canonical order: the record is journalled and hashed (canonicalJson writes it in one pass).
const record = (content: string, outcome: ToolOutcome, refusal: KernelRefusal | null = null, effect: IntrinsicEffect | null = null, offloadedRef: string | null = null): ToolCallRecord => ({
  content,
  effect,
  offloadedRef,
  outcome,
  refusal,
});

const withheld = (refusal: KernelRefusal, outcome: ToolOutcome, detail?: string) => record(refusalText(refusal, detail), outcome, refusal);

async function offload(ports: KernelPorts, taskId: string, callId: string, content: string): Promise<{ content: string; ref: string | null }> {
  if (content.length <= ports.policy.inlineResultChars) return { content, ref: null };
  const ref = await ports.results.put({ taskId, callId }, content);
  const preview = content.slice(0, ports.policy.previewChars);
  return {
    content: `${preview}\n[result truncated: ${content.length} chars stored as ${ref}; read the rest with read_tool_result {"ref": ${JSON.stringify(ref)}, "offset": ${preview.length}}]`,
    ref,
  };
}

/** Gates 0–2: the kernel's answer to a call it withholds on sight, or null when the call goes on. */
function withheldOnSight(ctx: RunContext, slot: Slot): ToolCallRecord | null {
  if (slot.rejected !== null) return withheld(slot.rejected.refusal, 'invalid', slot.rejected.detail);
  const descriptor = slot.descriptor as ToolDescriptor;
  const authorization = authorizeToolInvocation(descriptor, ctx.envelope);
  if (!authorization.allowed) return withheld(authorization.refusal, 'refused', `(tool ${descriptor.name})`);
  if (!modeAdmitsInvocation(descriptor, ctx.mode)) return withheld('shadow_denied', 'shadow_denied', `(tool ${descriptor.name})`);
  return null;
}

/** Gate 3 and the handler, for a call gates 0–2 admitted whose journal intent is open. Never throws for tool behaviour. */
async function decideAndRun(ports: KernelPorts, ctx: RunContext, state: RunState, slot: Slot, callId: string, events: KernelEvent[]): Promise<ToolCallRecord> {
  const { action } = slot;
  const descriptor = slot.descriptor as ToolDescriptor;
  const need = permissionRequired(descriptor);
  if (need.required) {
    const decision = ports.permission
      ? await ports.permission.request({
          taskId: ctx.taskId,
          turn: state.turn,
          callId,
          tool: descriptor.name,
          arguments: action.arguments,
          isReadOnly: descriptor.access === 'read',
          reason: need.reason,
          effects: descriptor.effects ?? null,
        })
      : ({ decision: 'deny', reason: 'no permission hook is configured' } as const);
    if (decision.decision === 'ask' && need.reason === 'consent_read') {
      throw new EverdictError(CONSENT_PENDING, `tool ${descriptor.name} waits for consent`, { details: { tool: descriptor.name, callId } });
    }
    if (decision.decision === 'deny') return withheld(decision.refusal ?? 'permission_denied', 'refused', decision.reason ? `(${decision.reason})` : undefined);
    if (decision.decision !== 'allow') return withheld('permission_denied', 'refused', '(a write is never asked for consent)');
  }

  if (isIntrinsic(descriptor)) {
    const r = await runIntrinsic(ports, ctx, state, { name: descriptor.name as IntrinsicToolName, args: action.arguments, callId, turn: state.turn }, events);
    return record(r.content, r.outcome, null, r.effect);
  }

  const handler = ports.tools.handler(descriptor.name);
  if (handler === undefined) return withheld('unregistered_tool', 'invalid', `(tool ${descriptor.name})`);
  let content: string;
  let outcome: ToolOutcome;
  try {
    const out = await handler.invoke(action.arguments, { taskId: ctx.taskId, turn: state.turn, callId });
    content = out.content;
    outcome = out.isError === true ? 'tool_error' : 'ok';
  } catch (err) {
    if (descriptor.access === 'read' && (unavailableConnector(err) !== null || capacityWait(err) !== null)) throw err;
    content = `Tool ${descriptor.name} failed: ${err instanceof Error ? err.message : String(err)}`;
    outcome = 'tool_error';
  }
  const stored = await offload(ports, ctx.taskId, callId, content);
  return record(stored.content, outcome, null, null, stored.ref);
}

const outcomeOf = (rec: ToolCallRecord) => ({ status: callStatusForOutcome(rec.outcome), response: rec, responseHash: payloadHash(rec) });

/** Journals, gates and runs one call; replays a recorded outcome instead of deciding again. */
async function settleCall(ports: KernelPorts, ctx: RunContext, state: RunState, slot: Slot, events: KernelEvent[]): Promise<{ rec: ToolCallRecord; callId: string; replayed: boolean }> {
  const { action, descriptor } = slot;
  const request = { tool: action.tool, arguments: action.arguments };
  const key = { taskId: ctx.taskId, turn: state.turn, ordinal: slot.ordinal };
  const fresh = ports.newId();
  const intent = { ...key, callId: fresh, kind: 'tool' as const, name: action.tool, request, requestHash: payloadHash(request) };
  const onSight = withheldOnSight(ctx, slot);
  const journalled = onSight === null ? await ports.journal.recordIntent(intent) : await ports.journal.recordWithheld(intent, outcomeOf(onSight));
  const callId = journalled.callId;
  if (journalled.status !== 'intent') {
    if (callId !== fresh || onSight === null) return { rec: journalled.response as ToolCallRecord, callId, replayed: true };
    // Withheld just now (a replay shows nothing new): shadow mode reports what was captured.
    if (onSight.outcome === 'shadow_denied') events.push({ type: 'shadow_intent', turn: state.turn, callId, tool: action.tool, arguments: action.arguments });
    return { rec: onSight, callId, replayed: false };
  }

  let rec: ToolCallRecord;
  const mayHaveLanded = descriptor === undefined || (descriptor.access !== 'read' && descriptor.outcomeAtomic !== true);
  if (callId !== fresh && mayHaveLanded) {
    // An earlier attempt of this write started and left no outcome: it may have landed.
    // Reads are safe to repeat; a write is never dispatched twice on a guess. (A write whose
    // effect commits only with its outcome left nothing behind: it runs again.) A name the
    // registry no longer knows is treated as a write.
    rec = withheld('outcome_unknown', 'unknown', `(tool ${action.tool})`);
  } else {
    // An open intent a withheld call finds was opened by an earlier attempt: it settles here.
    rec = onSight ?? (await decideAndRun(ports, ctx, state, slot, callId, events));
  }
  await ports.journal.recordOutcome({ ...key, callId }, outcomeOf(rec));
  return { rec, callId, replayed: false };
}

const parallelSafe = ({ descriptor: d, rejected }: Slot) => rejected === null && d !== undefined && d.access === 'read' && d.independent === true && !isIntrinsic(d);

/**
 * `rejected` (by index of `actions`) is given for a rejected action document: every call of it
 * is withheld with its refusal, and none is judged further.
 */
export async function dispatchActions(
  ports: KernelPorts,
  ctx: RunContext,
  state: RunState,
  actions: readonly ToolCallAction[],
  events: KernelEvent[],
  rejected: readonly DocumentRefusal[] | null = null,
): Promise<DispatchResult> {
  const slots: Slot[] = actions.map((action, i) => ({ action, ordinal: i + 1, descriptor: ports.tools.descriptor(action.tool), rejected: rejected?.[i] ?? null }));
  // Consecutive independent reads form one parallel batch; every other call is its own batch.
  const batches: Slot[][] = [];
  for (const slot of slots) {
    const last = batches.at(-1);
    if (last && parallelSafe(slot) && parallelSafe(last[0]!)) last.push(slot);
    else batches.push([slot]);
  }
  let current = state;
  const messages: ChatMessage[] = [];
  let executed = 0;
  let deferredChildren = 0;
  for (const batch of batches) {
    const before = current;
    // Every call of a batch ends before a failure of one is thrown: none is left running behind
    // the turn, and each outcome that was produced is recorded with it.
    const ended = await Promise.allSettled(batch.map((slot) => settleCall(ports, ctx, before, slot, events)));
    const failures = ended.flatMap((e) => (e.status === 'rejected' ? [e.reason as unknown] : []));
    // A real fault first, then a pending consent (it parks on a decision), then a down connector
    // or a per-case cap (both park on a timer).
    if (failures.length > 0)
      throw failures.find((f) => unavailableConnector(f) === null && pendingConsentTool(f) === null && capacityWait(f) === null) ?? failures.find((f) => pendingConsentTool(f) !== null) ?? failures[0];
    const settled = ended.map((e) => (e as PromiseFulfilledResult<Awaited<ReturnType<typeof settleCall>>>).value);
    settled.forEach(({ rec, callId, replayed }, i) => {
      const slot = batch[i]!;
      current = foldEffect(current, rec.effect);
      if (rec.effect?.kind === 'child' && rec.effect.deferred) deferredChildren++;
      if (rec.outcome === 'ok' || rec.outcome === 'tool_error') executed++;
      const isError = outcomeIsError(rec.outcome);
      events.push({ type: 'tool_result', turn: state.turn, callId, ordinal: slot.ordinal, tool: slot.action.tool, isError, outcome: rec.outcome, refusal: rec.refusal, replayed, offloadedRef: rec.offloadedRef });
      messages.push({ callId: slot.action.callId, content: rec.content, isError, name: slot.action.tool, role: 'tool' }); // keys in JCS order (canonicalised once, in one pass)
    });
  }
  return { state: current, messages, executed, deferredChildren };
}
