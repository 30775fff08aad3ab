/** A minimal kernel harness for bridge tests: scripted model, in-memory ports, recording hook. */
import type { ExecutionMode, ToolScope } from '@everdict/contracts';
import { routeIdentity, scriptedClient, type ScriptStep } from '@everdict/llm';
import { InMemoryJournal, InMemoryResultStore, initialRunState, kernelRegistry, recordingPermissionHook, runToSettlement, testKernelClock, type Tool } from '@everdict/agent-runtime';

export const answer = (text: string): ScriptStep => ({ text });

export function harnessFor(steps: ScriptStep[], tools: readonly Tool[], opts: { scope?: ToolScope; mode?: ExecutionMode } = {}) {
  const permission = recordingPermissionHook();
  const deps = {
    model: scriptedClient({ route: routeIdentity('mcp-test', { adapter: 'scripted', model: 's', scriptPath: 's.json' }), script: { steps } }),
    journal: new InMemoryJournal(),
    results: new InMemoryResultStore(),
    clock: testKernelClock(),
    permission,
    tools: kernelRegistry(tools),
  };
  const ctx = { taskId: 'task-mcp', systemPrompt: null, envelope: { scope: opts.scope ?? { reads: 'all' as const, writes: [], forbidden: [] }, budget: {} }, depth: 0, ...(opts.mode ? { mode: opts.mode } : {}) };
  return { permission, deps, ctx, run: () => runToSettlement(deps, ctx, initialRunState(ctx.taskId, 'go')) };
}
