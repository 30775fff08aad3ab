/**
 * Convenience drivers over `runTurn`: run to settlement (tests, the in-process mode, children
 * run in-process) and resume a suspended run. The durable turn-worker calls `runTurn` itself,
 * one claimed turn at a time, and commits each result before the next.
 */
import { EverdictError } from '@everdict/contracts';
import type { ModelClient } from '@everdict/llm';
import { childRegistry } from './children.js';
import type { KernelEvent } from './events.js';
import type { KernelDeps } from './kernel-ports.js';
import type { SpawnRequest, SubAgentPort } from './ports.js';
import type { ToolRegistry } from './registry.js';
import { initialRunState, type RunContext, type RunState, type Settlement } from './state.js';
import { runTurn } from './turn.js';

export interface RunResult {
  readonly state: RunState;
  readonly events: readonly KernelEvent[];
  readonly settlement: Settlement;
}

/** Runs turns until the run settles. `maxTurns` is a safety stop, not the budget (default 200). */
export async function runToSettlement(deps: KernelDeps, ctx: RunContext, state: RunState, opts: { maxTurns?: number; signal?: AbortSignal } = {}): Promise<RunResult> {
  const events: KernelEvent[] = [];
  let current = state;
  for (let i = 0; i < (opts.maxTurns ?? 200); i++) {
    const result = await runTurn(deps, ctx, current, { signal: opts.signal });
    events.push(...result.events);
    current = result.state;
    if (result.settlement !== null) return { state: current, events, settlement: result.settlement };
  }
  throw new EverdictError('run_unsettled', `run of task ${ctx.taskId} did not settle within ${opts.maxTurns ?? 200} turns`, { details: { taskId: ctx.taskId } });
}

/**
 * Continues a suspended run: clears the settlement and the armed wait, and appends what woke it
 * (an answer, the children's reports, a budget top-up note) as a user message.
 */
export function resumeRun(state: RunState, wakeNote?: string): RunState {
  return {
    ...state,
    settlement: null,
    wait: null,
    messages: wakeNote === undefined ? state.messages : [...state.messages, { content: wakeNote, role: 'user' }],
  };
}

interface InProcessSubAgentOptions {
  /** The parent's deps; the child gets the same ports with its own registry. */
  readonly deps: Omit<KernelDeps, 'tools' | 'subAgents'>;
  /** The parent's registry, from which the child's is recomputed (K4). */
  readonly parentTools: ToolRegistry;
  readonly systemPrompt?: string | null;
  /** Which model a child talks to. Default: the parent's. */
  readonly childModel?: (req: SpawnRequest) => ModelClient;
  readonly maxTurns?: number;
  /** Observes each child's full result (events included), e.g. for the host's ledger. */
  readonly onChildSettled?: (childTaskId: string, result: RunResult) => void;
}

/**
 * Runs each child to settlement in this process. The child's registry is recomputed from the
 * parent's (never taken from the request as given), its envelope and mode are the parent's,
 * and its usage starts from zero.
 */
export function inProcessSubAgents(opts: InProcessSubAgentOptions): SubAgentPort {
  const port: SubAgentPort = {
    async spawn(req) {
      const tools = childRegistry(opts.parentTools, req.envelope, req.toolNames);
      const childTaskId = (opts.deps.newId ?? (() => `${req.parentTaskId}.${req.spawnCallId}`))();
      const childDeps: KernelDeps = {
        ...opts.deps,
        model: opts.childModel?.(req) ?? opts.deps.model,
        tools,
        subAgents: inProcessSubAgents({ ...opts, parentTools: tools }),
      };
      const ctx: RunContext = {
        taskId: childTaskId,
        systemPrompt: opts.systemPrompt ?? null,
        envelope: req.envelope,
        ...(req.mode === undefined ? {} : { mode: req.mode }),
        depth: req.depth,
      };
      const result = await runToSettlement(childDeps, ctx, initialRunState(childTaskId, req.objective), { maxTurns: opts.maxTurns });
      opts.onChildSettled?.(childTaskId, result);
      return { kind: 'settled', childTaskId, settlement: result.settlement };
    },
  };
  return port;
}
