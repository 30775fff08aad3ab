/**
 * The deterministic `scripted` adapter: a script file plays the model, for tests, the demo and
 * the benchmark. The step answered is chosen from the REQUEST, never from a counter, so any
 * worker that restores a checkpoint gets the same answer the crashed worker would have got
 * (stepIndex: the steps the request shows, by their call ids, and its assistant messages).
 *
 * Script file (JSON): { "steps": [ step, ... ] } where a step is one of
 *   { "text"?: string|null, "toolCalls"?: [{ "name", "arguments"?: object, "argumentsText"?: string, "callId"?: string }],
 *     "usage"?: { "inputTokens": n, "outputTokens": n },       usage absent → unknown (null), never 0
 *     "failFirst"?: { "kind": ModelErrorKind, "times": n, "status"?: n, "retryAfterMs"?: n } }
 *        the first `times` attempts at this step (per client instance) fail with that error, then it answers
 *   { "error": { "kind": ModelErrorKind, "status"?: n, "reason"?: string } }   every attempt fails
 */
import { readFile } from 'node:fs/promises';
import { EverdictError } from '@everdict/contracts';
import type { ChatMessage, ModelClient, ModelReply, ModelRequest, ModelToolCall, RouteIdentity } from './model.js';
import { MODEL_ERROR_KINDS, ModelError, type ModelErrorKind } from './errors.js';

export interface ScriptToolCall {
  readonly name: string;
  readonly arguments?: Record<string, unknown>;
  /** Raw argument text, to script malformed model output. Wins over `arguments`. */
  readonly argumentsText?: string;
  readonly callId?: string;
}

export interface ScriptedFailure {
  readonly kind: ModelErrorKind;
  readonly status?: number;
  readonly reason?: string;
  /** As a provider's `Retry-After` would say, in ms. */
  readonly retryAfterMs?: number;
}

export type ScriptStep =
  | {
      readonly text?: string | null;
      readonly toolCalls?: readonly ScriptToolCall[];
      readonly usage?: { readonly inputTokens: number; readonly outputTokens: number };
      readonly failFirst?: ScriptedFailure & { readonly times: number };
    }
  | { readonly error: ScriptedFailure };

interface ModelScript {
  readonly steps: readonly ScriptStep[];
}

const ADAPTER = 'scripted';

function bad(field: string, why: string): never {
  throw new EverdictError('invalid_model_script', `script ${field} ${why}`, { details: { field } });
}

/** Shape check of a script; the error names the offending field. */
export function validateModelScript(value: unknown): ModelScript {
  if (value === null || typeof value !== 'object' || !Array.isArray((value as { steps?: unknown }).steps)) bad('steps', 'must be an array');
  const steps = (value as { steps: unknown[] }).steps;
  steps.forEach((s, i) => {
    const f = `steps[${i}]`;
    if (s === null || typeof s !== 'object') bad(f, 'must be an object');
    const step = s as Record<string, unknown>;
    if ('error' in step) {
      const e = step.error as Record<string, unknown> | null;
      if (!e || !(MODEL_ERROR_KINDS as readonly string[]).includes(e.kind as string)) bad(`${f}.error.kind`, `must be one of ${MODEL_ERROR_KINDS.join('|')}`);
      return;
    }
    if (step.failFirst !== undefined) {
      const e = step.failFirst as Record<string, unknown> | null;
      if (!e || !(MODEL_ERROR_KINDS as readonly string[]).includes(e.kind as string)) bad(`${f}.failFirst.kind`, `must be one of ${MODEL_ERROR_KINDS.join('|')}`);
      if (typeof e.times !== 'number' || e.times < 0) bad(`${f}.failFirst.times`, 'must be a non-negative number');
    }
    if (step.text !== undefined && step.text !== null && typeof step.text !== 'string') bad(`${f}.text`, 'must be a string or null');
    if (step.toolCalls !== undefined) {
      if (!Array.isArray(step.toolCalls)) bad(`${f}.toolCalls`, 'must be an array');
      (step.toolCalls as unknown[]).forEach((c, j) => {
        const call = c as Record<string, unknown> | null;
        if (!call || typeof call.name !== 'string') bad(`${f}.toolCalls[${j}].name`, 'must be a string');
      });
    }
  });
  return value as ModelScript;
}

export async function loadModelScript(path: string): Promise<ModelScript> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new EverdictError('invalid_model_script', `script file cannot be read`, { cause: err, details: { field: 'scriptPath' } });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new EverdictError('invalid_model_script', 'script file is not JSON', { cause: err, details: { field: 'scriptPath' } });
  }
  return validateModelScript(parsed);
}

function scriptedFailure(e: ScriptedFailure): ModelError {
  return new ModelError({ adapter: ADAPTER, kind: e.kind, reason: e.reason ?? 'scripted', status: e.status, ...(e.retryAfterMs !== undefined ? { retryAfterMs: e.retryAfterMs } : {}) });
}

/** A tool call id the adapter made (`call_<step>_<i>`, unless the script names its own): its step. */
const STEP_CALL_ID = /^call_(\d+)_\d+$/;

/**
 * The step a request asks for: one past the newest step whose tool calls it still shows (named by
 * the ids this adapter gives them), plus the assistant messages after that one; when it shows
 * none, the number of its assistant messages. Without compaction both read the same. A compacted
 * history (its earlier messages replaced by a summary) keeps its recent steps, so it asks for the
 * next step instead of replaying one it has dropped.
 */
export function stepIndex(messages: readonly ChatMessage[]): number {
  let after = 0;
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== 'assistant') continue;
    for (const c of m.toolCalls) {
      const step = STEP_CALL_ID.exec(c.callId);
      if (step) return Number(step[1]) + 1 + after;
    }
    after++;
  }
  return after;
}

interface ScriptedClientOptions {
  readonly route: RouteIdentity;
  /** The script itself, or a loader (e.g. from a file) run once on first use. */
  readonly script: ModelScript | (() => Promise<ModelScript>);
}

export function scriptedClient(opts: ScriptedClientOptions): ModelClient {
  let loaded: Promise<ModelScript> | undefined;
  const script = () => (loaded ??= typeof opts.script === 'function' ? opts.script() : Promise.resolve(validateModelScript(opts.script)));
  const failuresSoFar = new Map<number, number>();
  return {
    route: opts.route,
    async complete(req: ModelRequest, callOpts) {
      if (callOpts?.signal?.aborted) throw new EverdictError('model_call_aborted', 'scripted model call aborted by caller');
      const { steps } = await script();
      const index = stepIndex(req.messages);
      const step = steps[index];
      if (step === undefined) {
        throw new ModelError({ adapter: ADAPTER, kind: 'invalid_request', reason: 'script_exhausted', providerMessage: `no step ${index}` });
      }
      if ('error' in step) throw scriptedFailure(step.error);
      if (step.failFirst !== undefined) {
        const seen = failuresSoFar.get(index) ?? 0;
        if (seen < step.failFirst.times) {
          failuresSoFar.set(index, seen + 1);
          throw scriptedFailure(step.failFirst);
        }
      }
      // Keys in canonical order, as every adapter builds a reply (it is journalled and hashed).
      const toolCalls: ModelToolCall[] = (step.toolCalls ?? []).map((c, i) => ({
        argumentsText: c.argumentsText ?? JSON.stringify(c.arguments ?? {}),
        callId: c.callId ?? `call_${index}_${i}`,
        name: c.name,
      }));
      const reply: ModelReply = {
        finishReason: toolCalls.length > 0 ? 'tool_calls' : 'stop',
        output: { text: step.text ?? null, toolCalls },
        providerModel: opts.route.model,
        raw: JSON.stringify(step),
        usage: { inputTokens: step.usage?.inputTokens ?? null, outputTokens: step.usage?.outputTokens ?? null },
      };
      return reply;
    },
  };
}
