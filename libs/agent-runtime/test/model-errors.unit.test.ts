/** Provider failures are classified by the adapter and decided here; none crashes the loop. */
import { describe, expect, it } from 'vitest';
import type { ScriptStep } from '@everdict/llm';
import { resumeRun, runToSettlement } from '@everdict/agent-runtime';
import { answer, harness, scriptModel } from './harness.js';

describe('model call failures', () => {
  it.each<[string, ScriptStep, object, number[]]>([
    ['a transient 429 is retried with backoff, then answers', { text: 'done', failFirst: { kind: 'retryable', status: 429, times: 2 } }, { kind: 'completed', result: 'done' }, [250, 500]],
    ['retryable failures through every attempt mean the provider is down', { error: { kind: 'retryable', status: 500 } }, { kind: 'suspended', parkReason: 'provider_down', cause: 'provider_down', handoff: 'absent' }, [250, 500]],
    ['connection refused parks at once', { error: { kind: 'provider_down', reason: 'connection_refused' } }, { kind: 'suspended', parkReason: 'provider_down', cause: 'provider_down', handoff: 'absent' }, []],
    ['an invalid request fails the run without retrying', { error: { kind: 'invalid_request', status: 400 } }, { kind: 'failed', code: 'model_invalid_request' }, []],
    ['context too long parks (never fails) without retrying', { error: { kind: 'context_too_long', status: 400 } }, { kind: 'suspended', parkReason: 'capability_gap', cause: 'context_too_long', handoff: 'absent' }, []],
  ])('%s', async (_c, step, settlement, sleeps) => {
    const h = harness([step], []);
    const r = await h.run();
    expect(r.settlement).toMatchObject(settlement);
    // Each backoff is jittered into [ms/2, ms] (contracts jitteredBackoffMs).
    expect(h.clock.sleeps).toHaveLength(sleeps.length);
    h.clock.sleeps.forEach((s, i) => expect(s).toSatisfy((v: number) => v >= sleeps[i]! / 2 && v <= sleeps[i]!));
    // The model call's journal row says whether a response was persisted.
    const answered = (settlement as { kind: string }).kind === 'completed';
    expect(h.journal.get({ taskId: 'task-root', turn: 0, ordinal: 0 })?.status).toBe(answered ? 'completed' : 'failed');
  });

  it("a 429's Retry-After is the floor of the retry's backoff and reaches the park", async () => {
    const h = harness([{ text: 'done', failFirst: { kind: 'retryable', status: 429, times: 1, retryAfterMs: 7_000 } }], []);
    const r = await h.run();
    expect(r.settlement).toMatchObject({ kind: 'completed' });
    expect(h.clock.sleeps).toHaveLength(1);
    expect(h.clock.sleeps[0]).toSatisfy((v: number) => v >= 7_000 && v <= 7_700);
    const down = harness([{ error: { kind: 'retryable', status: 503, retryAfterMs: 30_000 } }], []);
    const parked = await down.run();
    expect(parked.settlement).toMatchObject({ kind: 'suspended', parkReason: 'provider_down' });
    for (const s of down.clock.sleeps) expect(s).toBeGreaterThanOrEqual(30_000);
    // The turn-worker reads the floor for the park's timer from these events.
    expect(parked.events.filter((e) => e.type === 'model_error').map((e) => e.type === 'model_error' && e.retryAfterMs)).toEqual([30_000, 30_000, 30_000]);
  });

  it('a provider_down park resumes the same turn and re-asks the model', async () => {
    const h = harness([{ error: { kind: 'provider_down' } }], []);
    const parked = await h.run();
    expect(parked.state.turn).toBe(0);
    const healed = { ...h.deps, model: scriptModel([answer('back')]) };
    const r = await runToSettlement(healed, h.ctx, resumeRun(parked.state));
    expect(r.settlement).toEqual({ kind: 'completed', result: 'back' });
    expect(h.journal.get({ taskId: 'task-root', turn: 0, ordinal: 0 })?.status).toBe('completed');
  });

  it('unmeasured usage stays unknown, never zero', async () => {
    const h = harness([{ text: 'a' }], []);
    const r = await h.run();
    expect(r.state.usage).toMatchObject({ measuredTokens: 0, unmeasuredModelCalls: 1 });
    const call = r.events.find((e) => e.type === 'model_call');
    expect(call?.type === 'model_call' && call.usage).toEqual({ inputTokens: null, outputTokens: null });
  });
});
