/**
 * Reading the turn-worker's tool trace (services/turn-worker/src/tools.ts): with LOG_LEVEL=debug
 * every base tool invocation writes `tool started` before its handler runs and `tool finished`
 * after, as JSON lines on stdout, synchronously. What a process wrote before it was SIGKILLed
 * is still in the pipe, so the trace is an observation made at execution time, outside the
 * turn's unit of work, that outlives the process — what tests use to prove a read ran, or ran
 * once.
 */
import type { Readable } from 'node:stream';

interface ToolTraceEvent {
  readonly event: 'started' | 'finished';
  readonly caseId?: string;
  readonly taskId: string;
  readonly turn: number;
  readonly callId: string;
  readonly tool: string;
  /** Wall-clock time the line was written, ms since the epoch. */
  readonly at: number;
  readonly ms?: number;
  readonly outcome?: string;
}

/** The tool-trace lines in `text` (a process's stdout; other lines are ignored), in order. */
export function toolTrace(text: string): ToolTraceEvent[] {
  const events: ToolTraceEvent[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('{') || !line.includes('"tool ')) continue;
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(line) as Record<string, unknown>;
    } catch {
      continue;
    }
    if (o.msg !== 'tool started' && o.msg !== 'tool finished') continue;
    events.push({
      event: o.msg === 'tool started' ? 'started' : 'finished',
      ...(typeof o.caseId === 'string' ? { caseId: o.caseId } : {}),
      taskId: String(o.taskId),
      turn: Number(o.turn),
      callId: String(o.callId),
      tool: String(o.tool),
      at: typeof o.time === 'string' ? Date.parse(o.time) : Number(o.time),
      ...(typeof o.ms === 'number' ? { ms: o.ms } : {}),
      ...(typeof o.outcome === 'string' ? { outcome: o.outcome } : {}),
    });
  }
  return events;
}

/**
 * Everything `stream` emits from now on, after `seed` (what was captured before; pass the
 * process's output so far). Unbounded, unlike a rolling tail: the whole trace of a long-lived
 * worker stays readable.
 */
export function recordStream(stream: Readable, seed = ''): () => string {
  const chunks: string[] = [seed];
  stream.on('data', (b: Buffer | string) => chunks.push(b.toString()));
  return () => chunks.join('');
}
