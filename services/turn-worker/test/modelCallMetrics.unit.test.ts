import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ModelError } from '@everdict/llm';
import type { ModelClient, ModelReply, ModelUsage } from '@everdict/llm';
import { meteredModelClient, turnMetrics } from '../src/metrics.js';

/** A model behind one route that answers or fails as told: the seam the metering wraps. */
function model(route: string, answer: () => Promise<ModelReply>): ModelClient {
  return { route: { name: route, adapter: 'scripted', model: 'm', configHash: 'sha256:0' }, complete: answer };
}
const reply = (usage: ModelUsage): ModelReply => ({ output: { text: 'ok', toolCalls: [] }, usage, finishReason: 'stop', providerModel: 'm', raw: '{}' });
const request = { system: null, messages: [], tools: [] };

function value(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('model-call metrics (by route and outcome class, never by content)', () => {
  it('counts a call, its duration and the tokens the provider reported; unreported usage adds nothing', async () => {
    const registry = new Registry();
    const metrics = turnMetrics(registry);
    await meteredModelClient(model('agent', async () => reply({ inputTokens: 150, outputTokens: 30 })), metrics).complete(request);
    await meteredModelClient(model('agent', async () => reply({ inputTokens: null, outputTokens: null })), metrics).complete(request);
    const text = await registry.metrics();
    expect(value(text, 'everdict_model_call_duration_seconds_count{route="agent",outcome="ok"}')).toBe(2);
    expect(value(text, 'everdict_model_input_tokens_total{route="agent"}')).toBe(150);
    expect(value(text, 'everdict_model_output_tokens_total{route="agent"}')).toBe(30);
    expect(text).not.toContain('everdict_model_call_errors_total{');
  });

  it('classifies failures by ModelError kind, a caller abort as cancelled, anything else as error, and rethrows the same error', async () => {
    const registry = new Registry();
    const metrics = turnMetrics(registry);
    const down = new ModelError({ kind: 'provider_down', reason: 'connection_refused', adapter: 'openai' });
    await expect(meteredModelClient(model('r', () => Promise.reject(down)), metrics).complete(request)).rejects.toBe(down);
    const ctl = new AbortController();
    ctl.abort();
    await expect(meteredModelClient(model('r', () => Promise.reject(new Error('aborted'))), metrics).complete(request, { signal: ctl.signal })).rejects.toThrow('aborted');
    await expect(meteredModelClient(model('r', () => Promise.reject(new TypeError('bug'))), metrics).complete(request)).rejects.toThrow('bug');
    const text = await registry.metrics();
    for (const kind of ['provider_down', 'cancelled', 'error']) {
      expect(value(text, `everdict_model_call_errors_total{route="r",kind="${kind}"}`), kind).toBe(1);
      expect(value(text, `everdict_model_call_duration_seconds_count{route="r",outcome="${kind}"}`), kind).toBe(1);
    }
    expect(text).not.toContain('everdict_model_input_tokens_total{');
  });
});
