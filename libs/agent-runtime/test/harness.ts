/** Test harness: real kernel, scripted model, in-memory ports, probe tools that count calls. */
import type { ExecutionMode, RunBudget, ToolDescriptor, ToolScope } from '@everdict/contracts';
import { routeIdentity, scriptedClient, type ModelClient, type ScriptStep } from '@everdict/llm';
import {
  InMemoryJournal,
  InMemoryResultStore,
  initialRunState,
  kernelRegistry,
  recordingPermissionHook,
  runToSettlement,
  testKernelClock,
  type HandoffPort,
  type KernelDeps,
  type KernelEvent,
  type KernelPolicy,
  type PermissionDecision,
  type PermissionRequest,
  type RunContext,
  type SubAgentPort,
  type Tool,
  type ToolRegistry,
} from '@everdict/agent-runtime';

export interface ProbeTool extends Tool {
  readonly calls: Record<string, unknown>[];
}

export function probeTool(
  name: string,
  opts: Partial<Omit<ToolDescriptor, 'name'>> & { output?: string | ((args: Record<string, unknown>) => string); isError?: boolean; throws?: string } = {},
): ProbeTool {
  const calls: Record<string, unknown>[] = [];
  const { output, isError, throws, ...d } = opts;
  return {
    calls,
    descriptor: {
      name,
      description: `probe ${name}`,
      inputSchema: { type: 'object' },
      access: 'read',
      origin: 'first_party',
      transport: 'in_process',
      argumentValidation: 'kernel',
      ...d,
    },
    async invoke(args) {
      calls.push({ ...args });
      if (throws !== undefined) throw new Error(throws);
      const content = typeof output === 'function' ? output({ ...args }) : (output ?? `${name} ok`);
      return { content, isError };
    },
  };
}

export const OPEN_SCOPE: ToolScope = { reads: 'all', writes: [], forbidden: [] };

export function scriptModel(steps: ScriptStep[], name = 'test'): ModelClient {
  return scriptedClient({ route: routeIdentity(name, { adapter: 'scripted', model: `script-${name}`, scriptPath: `${name}.json` }), script: { steps } });
}

/** A step calling tools with JSON arguments. */
export const call = (...calls: [string, Record<string, unknown>?][]): ScriptStep => ({ toolCalls: calls.map(([name, args]) => ({ name, arguments: args ?? {} })) });
export const answer = (text: string): ScriptStep => ({ text });

export interface HarnessOptions {
  scope?: ToolScope;
  budget?: RunBudget;
  mode?: ExecutionMode;
  permission?: (req: PermissionRequest) => PermissionDecision;
  noPermissionHook?: boolean;
  handoff?: HandoffPort;
  subAgents?: (tools: ToolRegistry, deps: Omit<KernelDeps, 'tools' | 'subAgents'>) => SubAgentPort;
  policy?: Partial<KernelPolicy>;
  taskId?: string;
}

export function harness(steps: ScriptStep[], baseTools: Tool[], opts: HarnessOptions = {}) {
  const journal = new InMemoryJournal();
  const results = new InMemoryResultStore();
  const clock = testKernelClock();
  const permission = recordingPermissionHook(opts.permission);
  let n = 0;
  const newId = () => `id-${String(++n).padStart(4, '0')}`;
  const tools = kernelRegistry(baseTools);
  const base: Omit<KernelDeps, 'tools' | 'subAgents'> = {
    model: scriptModel(steps),
    journal,
    results,
    clock,
    newId,
    ...(opts.noPermissionHook ? {} : { permission }),
    ...(opts.handoff ? { handoff: opts.handoff } : {}),
    ...(opts.policy ? { policy: opts.policy } : {}),
  };
  const deps: KernelDeps = { ...base, tools, ...(opts.subAgents ? { subAgents: opts.subAgents(tools, base) } : {}) };
  const taskId = opts.taskId ?? 'task-root';
  const ctx: RunContext = {
    taskId,
    systemPrompt: 'You are a test agent.',
    envelope: { scope: opts.scope ?? OPEN_SCOPE, budget: opts.budget ?? {} },
    ...(opts.mode ? { mode: opts.mode } : {}),
    depth: 0,
  };
  const start = initialRunState(taskId, 'do the thing');
  return { journal, results, clock, permission, tools, deps, ctx, start, run: () => runToSettlement(deps, ctx, start) };
}

export type Harness = ReturnType<typeof harness>;

/** Wraps a model and counts how often it was really asked. */
export function countingModel(inner: ModelClient): ModelClient & { asked: number } {
  const m = {
    asked: 0,
    route: inner.route,
    complete: (req: Parameters<ModelClient['complete']>[0], o?: Parameters<ModelClient['complete']>[1]) => {
      m.asked++;
      return inner.complete(req, o);
    },
  };
  return m;
}

/** The tool_result events of a run, in order. */
export function toolResults(events: readonly { type: string }[]) {
  return events.filter((e): e is Extract<KernelEvent, { type: 'tool_result' }> => e.type === 'tool_result');
}
