/**
 * The journalled model call (ordinal 0 of a turn). The exact request is recorded as an intent
 * before dispatch; a response already recorded for this turn is reused and the model is NOT
 * asked again; only a turn whose response was never persisted is re-asked. Retries are decided
 * here from the adapter's classification: `retryable` is retried with backoff, and a retryable
 * failure that persists through every attempt is treated as the provider being down.
 */
import { EverdictError, jitteredBackoffMs, payloadHash } from '@everdict/contracts';
import { isModelError, ModelError, type ModelReply, type ModelRequest } from '@everdict/llm';
import type { KernelEvent } from './events.js';
import type { KernelPorts } from './kernel-ports.js';

type ModelCallResult =
  | { readonly ok: true; readonly reply: ModelReply; readonly callId: string }
  | { readonly ok: false; readonly error: ModelError; readonly callId: string };

export async function journaledModelCall(
  ports: KernelPorts,
  key: { taskId: string; turn: number },
  request: ModelRequest,
  events: KernelEvent[],
  signal?: AbortSignal,
): Promise<ModelCallResult> {
  const { journal, model, policy } = ports;
  const requestDoc = { route: model.route, request };
  const requestHash = journal.requestHash?.(requestDoc) ?? payloadHash(requestDoc);
  const record = await journal.recordIntent({ ...key, ordinal: 0, callId: ports.newId(), kind: 'model', name: model.route.name, request: requestDoc, requestHash });
  const callId = record.callId;
  if (record.status === 'completed') {
    // The turn is being resumed from the same checkpoint, so the request must be the same one.
    // The route is not compared: a response persisted by the route that served it stays the
    // answer even if the route was swapped since (the model is never re-asked for it).
    const recorded = (record.request as { request?: unknown } | null)?.request;
    if (payloadHash(recorded ?? null) !== payloadHash(request)) {
      throw new EverdictError('journal_request_mismatch', `turn ${key.turn} of task ${key.taskId} was answered for a different model request`, {
        details: { taskId: key.taskId, turn: key.turn, callId },
      });
    }
    const reply = record.response as ModelReply;
    events.push({ type: 'model_call', turn: key.turn, callId, route: model.route, usage: reply.usage, replayed: true, attempts: 0 });
    return { ok: true, reply, callId };
  }

  let lastError: ModelError | undefined;
  let attempt = 0;
  while (attempt < policy.modelAttempts) {
    attempt++;
    try {
      const reply = await model.complete(request, { signal, timeoutMs: policy.modelTimeoutMs });
      await journal.recordOutcome({ ...key, ordinal: 0, callId }, { status: 'completed', response: reply, responseHash: payloadHash(reply) });
      events.push({ type: 'model_call', turn: key.turn, callId, route: model.route, usage: reply.usage, replayed: false, attempts: attempt });
      return { ok: true, reply, callId };
    } catch (err) {
      if (!isModelError(err)) throw err; // cancellation and bugs are not provider behaviour
      lastError = err;
      events.push({ type: 'model_error', turn: key.turn, callId, kind: err.kind, reason: err.reason, attempt, ...(err.retryAfterMs !== undefined ? { retryAfterMs: err.retryAfterMs } : {}) });
      if (err.kind !== 'retryable') break;
      // Jittered, and never sooner than the provider's Retry-After.
      if (attempt < policy.modelAttempts) await ports.clock.sleep(jitteredBackoffMs(policy.retryBackoffMs * 2 ** (attempt - 1), { floorMs: err.retryAfterMs ?? null }), signal);
    }
  }
  const error =
    lastError !== undefined && lastError.kind === 'retryable'
      ? new ModelError({ adapter: model.route.adapter, kind: 'provider_down', reason: `repeated_${lastError.reason}`, status: lastError.status, ...(lastError.retryAfterMs !== undefined ? { retryAfterMs: lastError.retryAfterMs } : {}) }, lastError)
      : (lastError as ModelError);
  const failure = { error: { kind: error.kind, reason: error.reason, status: error.status ?? null } };
  await journal.recordOutcome({ ...key, ordinal: 0, callId }, { status: 'failed', response: failure, responseHash: payloadHash(failure) });
  return { ok: false, error, callId };
}
