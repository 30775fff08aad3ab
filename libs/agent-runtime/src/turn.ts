/**
 * One turn (DESIGN §5 steps 3–6): budget check, the journalled model call, one action
 * document, its calls, and the settlement if the run halts. `runTurn` is pure over its ports:
 * given the restored state it produces the next state and the turn's events, and the host
 * commits both with the checkpoint. Running the same turn again from the same state replays
 * the journal instead of repeating any call.
 */
import { budgetExhausted, capacityWait, EverdictError, pendingConsentTool, refusalText, unavailableConnector, type BudgetDimension, type CapacityWait, type ParkReason, type ToolCallAction } from '@everdict/contracts';
import type { ChatMessage, ModelRequest } from '@everdict/llm';
import { decodeActionDocument, PROBLEM_REFUSAL } from './action-document.js';
import { dispatchActions, type DocumentRefusal } from './dispatch.js';
import type { KernelEvent } from './events.js';
import { resolvePorts, type KernelDeps, type KernelPorts } from './kernel-ports.js';
import { journaledModelCall } from './model-call.js';
import type { HandoffFate } from './ports.js';
import type { RunContext, RunState, Settlement } from './state.js';

export interface TurnResult {
  readonly state: RunState;
  readonly events: readonly KernelEvent[];
  /** Non-null when the run halted this turn; also recorded in `state.settlement`. */
  readonly settlement: Settlement | null;
}

export function modelRequestFor(ports: Pick<KernelPorts, 'tools'>, ctx: RunContext, state: RunState): ModelRequest {
  return {
    system: ctx.systemPrompt,
    messages: state.messages,
    tools: ports.tools.descriptors.map((d) => ({ name: d.name, description: d.description, inputSchema: d.inputSchema })),
    ...(ctx.maxOutputTokens === undefined ? {} : { maxOutputTokens: ctx.maxOutputTokens }),
  };
}

/**
 * A halt owes a handoff (K5): publish the resumable state (no settlement, so a successor simply
 * continues it) and record the fate the host reports — never assume it was published.
 */
async function suspend(
  ports: KernelPorts,
  state: RunState,
  parkReason: ParkReason,
  cause: Extract<Settlement, { kind: 'suspended' }>['cause'],
  extra: { budgetDimension?: BudgetDimension; answers?: number; connector?: string; capacity?: CapacityWait } = {},
): Promise<RunState> {
  let handoff: HandoffFate = 'absent';
  if (ports.handoff !== undefined) {
    try {
      handoff = await ports.handoff.publish({ taskId: state.taskId, parkReason, cause, state: { ...state, settlement: null } });
    } catch {
      handoff = 'failed';
    }
  }
  return { ...state, settlement: { kind: 'suspended', parkReason, cause, handoff, ...extra } };
}

function settled(state: RunState, events: KernelEvent[]): TurnResult {
  const settlement = state.settlement as Settlement;
  events.push({ type: 'settled', turn: state.turn, settlement });
  return { state, events, settlement };
}

export async function runTurn(deps: KernelDeps, ctx: RunContext, state: RunState, opts: { signal?: AbortSignal } = {}): Promise<TurnResult> {
  const ports = resolvePorts(deps);
  if (state.settlement !== null) {
    throw new EverdictError('run_settled', `run of task ${state.taskId} is settled (${state.settlement.kind}); resume it before running another turn`, { details: { taskId: state.taskId } });
  }
  if (state.taskId !== ctx.taskId) throw new EverdictError('task_mismatch', 'run state belongs to another task', { details: { field: 'taskId' } });
  const events: KernelEvent[] = [];
  const startedMs = ports.clock.now().getTime();
  const charge = (s: RunState): RunState => ({ ...s, usage: { ...s.usage, activeMs: s.usage.activeMs + (ports.clock.now().getTime() - startedMs) } });

  const budget = budgetExhausted(ctx.envelope.budget, state.usage);
  if (budget.exhausted) {
    events.push({ type: 'budget_exhausted', turn: state.turn, dimension: budget.dimension, limit: budget.limit, used: budget.used });
    return settled(await suspend(ports, state, 'budget', 'budget_exhausted', { budgetDimension: budget.dimension }), events);
  }

  const call = await journaledModelCall(ports, { taskId: ctx.taskId, turn: state.turn }, modelRequestFor(ports, ctx, state), events, opts.signal);
  if (!call.ok) {
    const { error } = call;
    // The turn is not consumed: resuming re-asks the model for the same turn.
    if (error.kind === 'provider_down' || error.kind === 'retryable') return settled(await suspend(ports, charge(state), 'provider_down', 'provider_down'), events);
    // The request outgrew the model's window: nothing in the run is wrong, so it is never
    // failed for it. The host compacts a context by its size before it gets there; one that
    // still does waits, parked with its state published, for an operator (a smaller context, a
    // route with a larger window).
    if (error.kind === 'context_too_long') return settled(await suspend(ports, charge(state), 'capability_gap', 'context_too_long'), events);
    return settled({ ...charge(state), settlement: { kind: 'failed', code: `model_${error.kind}`, message: error.message } }, events);
  }

  const { reply } = call;
  const measured = reply.usage.inputTokens !== null && reply.usage.outputTokens !== null;
  let next: RunState = {
    ...state,
    messages: [...state.messages, { content: reply.output.text, role: 'assistant', toolCalls: reply.output.toolCalls }], // keys in JCS order
    usage: {
      ...state.usage,
      turns: state.usage.turns + 1,
      measuredTokens: state.usage.measuredTokens + (reply.usage.inputTokens ?? 0) + (reply.usage.outputTokens ?? 0),
      unmeasuredModelCalls: state.usage.unmeasuredModelCalls + (measured ? 0 : 1),
    },
  };

  const decoded = decodeActionDocument(reply.output, ports.tools);
  let actions: readonly ToolCallAction[];
  let rejected: DocumentRefusal[] | null = null;
  if (!decoded.ok) {
    // Nothing in an invalid document runs; every call still gets an answer the model can use,
    // and a journal row that records it (dispatch withholds each one on sight).
    events.push({ type: 'action_rejected', turn: state.turn, problems: decoded.problems });
    const docLevel = decoded.problems.filter((p) => p.callId === null);
    if (decoded.actions.length === 0) {
      const feedback: ChatMessage = { role: 'user', content: refusalText('invalid_action_document', `(${docLevel.map((p) => p.detail).join('; ')})`) };
      next = { ...next, messages: [...next.messages, feedback], turn: state.turn + 1 };
      return { state: charge(next), events, settlement: null };
    }
    actions = decoded.actions;
    rejected = actions.map((a) => {
      const own = decoded.problems.find((p) => p.callId === a.callId);
      if (own) return { refusal: PROBLEM_REFUSAL[own.kind], detail: `(${own.detail})` };
      return { refusal: 'invalid_action_document', detail: docLevel.length > 0 ? `(${docLevel.map((p) => p.detail).join('; ')})` : '(another call in this response was invalid)' };
    });
  } else {
    const { document } = decoded;
    if (document.actions.length === 0) {
      next = { ...next, turn: state.turn + 1, settlement: { kind: 'completed', result: document.text } };
      return settled(charge(next), events);
    }
    actions = document.actions;
  }

  let dispatched: Awaited<ReturnType<typeof dispatchActions>>;
  try {
    dispatched = await dispatchActions(ports, ctx, next, actions, events, rejected);
  } catch (err) {
    // The turn is not consumed: resuming replays the journalled response and the calls that
    // completed, and asks for the consent of the call whose intent is open again.
    if (pendingConsentTool(err) !== null) return settled(await suspend(ports, charge(state), 'consent', 'consent'), events);
    // A per-case cap held a read back before it started: the same replay when it resumes.
    const capacity = capacityWait(err);
    if (capacity !== null) return settled(await suspend(ports, charge(state), 'capacity', 'capacity', { capacity }), events);
    const connector = unavailableConnector(err);
    if (connector === null) throw err;
    // The turn is not consumed: resuming replays the journalled response and the calls that
    // completed, and runs the read whose intent is open again under its call id.
    return settled(await suspend(ports, charge(state), 'connector_down', 'connector_down', { connector }), events);
  }
  next = {
    ...dispatched.state,
    messages: [...dispatched.state.messages, ...dispatched.messages],
    usage: { ...dispatched.state.usage, toolCalls: dispatched.state.usage.toolCalls + dispatched.executed },
    turn: state.turn + 1,
  };
  next = charge(next);
  if (next.wait !== null) {
    const answers = next.wait.answers?.length ?? 0;
    return settled(await suspend(ports, next, next.wait.for === 'question' ? 'question' : 'children', 'wait', answers > 0 ? { answers } : {}), events);
  }
  if (dispatched.deferredChildren > 0) return settled(await suspend(ports, next, 'children', 'children'), events);
  return { state: next, events, settlement: null };
}
