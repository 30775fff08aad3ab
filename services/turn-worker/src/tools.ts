/**
 * Built-in tools declared in the fleet config's `tools` section. All are first-party, in-process
 * reads:
 * - `static` answers its configured `output`;
 * - `echo` answers its arguments (canonical JSON);
 * - `probe` first records the execution (call id, task, tool) in `probe_executions` — in its own
 *   statement, outside every turn's unit of work, exactly like an external read that leaves a
 *   trace — then answers `output`. Tests and benchmarks count these rows to prove that no
 *   completed read ran twice.
 */
import { canonicalJson } from '@everdict/contracts';
import type { FleetTool } from '@everdict/contracts';
import type { Tool } from '@everdict/agent-runtime';
import type { Db } from '@everdict/store';

export const PROBE_TABLE_DDL = `CREATE TABLE IF NOT EXISTS probe_executions (
  seq         bigserial PRIMARY KEY,
  call_id     uuid NOT NULL,
  task_id     uuid NOT NULL,
  tool        text NOT NULL,
  executed_at timestamptz NOT NULL DEFAULT clock_timestamp()
)`;

/** Creates the probe table once; concurrent creators racing on the catalog are harmless. */
export async function ensureProbeTable(db: Db): Promise<void> {
  try {
    await db.query({ text: PROBE_TABLE_DDL });
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code !== 'duplicate_key' && code !== '23505' && code !== '42P07') throw err;
  }
}

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
export function builtinTool(name: string, spec: FleetTool, deps: { db: Db; timing: (taskId: string) => ToolTiming | undefined }): Tool {
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
        if (spec.builtin === 'probe') {
          await deps.db.query({
            name: 'tw_probe_execution',
            text: 'INSERT INTO probe_executions (call_id, task_id, tool) VALUES ($1::uuid, $2::uuid, $3::text)',
            values: [ctx.callId, ctx.taskId, name],
          });
        }
        await sleep(spec.delayMs ?? 0, ctx.signal);
        return { content: spec.builtin === 'echo' ? canonicalJson(args) : output };
      } finally {
        deps.timing(ctx.taskId)?.addToolMs(performance.now() - started);
      }
    },
  };
}
