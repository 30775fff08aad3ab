/**
 * The tools an agent's registry holds in this process.
 *
 * Built-in tools, declared in the fleet config's `tools` section, are first-party, in-process
 * reads: `static` answers its configured `output`, `echo` answers its arguments (canonical
 * JSON); either waits `delayMs` first.
 *
 * Every base tool the catalog hands out is `traced`: its invocation is logged at debug level,
 * `tool started` before the handler runs and `tool finished` after, with safe ids only (case,
 * task, turn, journal call id, tool name), the duration and the outcome class, never arguments
 * or results. The lines are written synchronously to stdout at execution time, outside any
 * unit of work, so they record every real execution — including one whose worker is killed
 * before it commits — and an operator can follow a task's tool calls with LOG_LEVEL=debug.
 */
import { canonicalJson, isEverdictError } from '@everdict/contracts';
import type { FleetTool } from '@everdict/contracts';
import type { Tool, ToolOutput } from '@everdict/agent-runtime';
import type { Logger } from '@everdict/service-kit';
import { SPAN, withSpan } from '@everdict/tracing';

export interface ToolTiming {
  /** Adds time spent inside tool handlers (excluded from the runtime's overhead). */
  addToolMs(ms: number): void;
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    });
  });
}

/** Builds the handler of one configured tool. `timing` finds the running turn's sink by task id. */
export function builtinTool(name: string, spec: FleetTool, deps: { timing: (taskId: string) => ToolTiming | undefined }): Tool {
  const output = spec.output ?? `${name}: ok`;
  return {
    descriptor: {
      name,
      description: spec.description,
      inputSchema: spec.inputSchema ?? { type: 'object' },
      access: 'read',
      origin: 'first_party',
      transport: 'in_process',
      argumentValidation: 'kernel',
      independent: spec.independent ?? true,
    },
    async invoke(args, ctx) {
      const started = performance.now();
      try {
        await sleep(spec.delayMs ?? 0, ctx.signal);
        return { content: spec.builtin === 'echo' ? canonicalJson(args) : output };
      } finally {
        deps.timing(ctx.taskId)?.addToolMs(performance.now() - started);
      }
    },
  };
}

/** How an invocation ended, as `tool finished` reports it. */
type ToolOutcome = 'ok' | 'tool_error' | 'threw' | 'aborted';

/**
 * `tool` with its invocations logged (see the header). `caseOf` names the case of a running
 * task; the trace never fails or delays the call it describes beyond the synchronous write.
 */
export function traced(tool: Tool, logger: Logger, caseOf: (taskId: string) => string | undefined): Tool {
  const name = tool.descriptor.name;
  return {
    descriptor: tool.descriptor,
    async invoke(args, ctx) {
      // The span names the call (case, task, turn, journal call id, tool), never its arguments or result.
      const attributes = { 'case.id': caseOf(ctx.taskId), 'task.id': ctx.taskId, turn: ctx.turn, 'call.id': ctx.callId, 'tool.name': name };
      return withSpan(SPAN.toolCall, { attributes }, () => (logger.isLevelEnabled('debug') ? logged(args, ctx) : tool.invoke(args, ctx)));
    },
  };

  async function logged(...[args, ctx]: Parameters<Tool['invoke']>): Promise<ToolOutput> {
    const ids = { caseId: caseOf(ctx.taskId), taskId: ctx.taskId, turn: ctx.turn, callId: ctx.callId, tool: name };
    logger.debug(ids, 'tool started');
    const started = performance.now();
    let outcome: ToolOutcome = 'threw';
    let code: string | undefined;
    try {
      const out: ToolOutput = await tool.invoke(args, ctx);
      outcome = ctx.signal?.aborted ? 'aborted' : out.isError ? 'tool_error' : 'ok';
      return out;
    } catch (err) {
      if (isEverdictError(err)) code = err.code;
      throw err;
    } finally {
      logger.debug({ ...ids, ms: Math.round(performance.now() - started), outcome, ...(code ? { code } : {}) }, 'tool finished');
    }
  }
}
