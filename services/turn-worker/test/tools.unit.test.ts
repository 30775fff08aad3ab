import { describe, expect, it } from 'vitest';
import { EverdictError } from '@everdict/contracts';
import type { Tool } from '@everdict/agent-runtime';
import { createLogger } from '@everdict/service-kit';
import { builtinTool, traced } from '../src/tools.js';

function capture(level: 'debug' | 'info') {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({ service: 'turn-worker', level, destination: { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) } });
  return { logger, lines };
}

const ctx = { taskId: '01934b7e-0000-7000-8000-000000000002', turn: 3, callId: '01934b7e-0000-7000-8000-000000000003' };
const caseOf = () => '01934b7e-0000-7000-8000-000000000001';

describe('the tool trace', () => {
  it('logs start and finish with safe ids, duration and outcome, never arguments or results', async () => {
    const { logger, lines } = capture('debug');
    const tool = traced(builtinTool('lookup', { builtin: 'echo', description: 'Echo.' }, { timing: () => undefined }), logger, caseOf);
    const out = await tool.invoke({ secretQuery: 'customer 42 owes' }, ctx);
    expect(out.content).toContain('customer 42 owes');
    expect(lines.map((l) => l.msg)).toEqual(['tool started', 'tool finished']);
    const ids = { caseId: caseOf(), taskId: ctx.taskId, turn: 3, callId: ctx.callId, tool: 'lookup' };
    expect(lines[0]).toMatchObject({ level: 20, ...ids });
    expect(lines[1]).toMatchObject({ level: 20, ...ids, outcome: 'ok' });
    expect(typeof lines[1]!.ms).toBe('number');
    expect(JSON.stringify(lines)).not.toContain('customer 42');
  });

  it('classes a tool error and a thrown error (with its code); the error still reaches the caller', async () => {
    const { logger, lines } = capture('debug');
    const failing = (fn: () => Promise<{ content: string; isError?: boolean }>): Tool => ({
      descriptor: builtinTool('x', { builtin: 'static', description: 'X.' }, { timing: () => undefined }).descriptor,
      invoke: fn,
    });
    await traced(failing(async () => ({ content: 'nope', isError: true })), logger, caseOf).invoke({}, ctx);
    await expect(traced(failing(async () => Promise.reject(new EverdictError('connector_down', 'down'))), logger, caseOf).invoke({}, ctx)).rejects.toThrow('down');
    const finished = lines.filter((l) => l.msg === 'tool finished');
    expect(finished.map((l) => [l.outcome, l.code])).toEqual([['tool_error', undefined], ['threw', 'connector_down']]);
  });

  it('writes nothing below debug level', async () => {
    const { logger, lines } = capture('info');
    await traced(builtinTool('lookup', { builtin: 'static', description: 'S.' }, { timing: () => undefined }), logger, caseOf).invoke({}, ctx);
    expect(lines).toEqual([]);
  });
});
