import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createModelClient, ModelRouter, routeIdentity, validateRoute } from '@everdict/llm';

describe('route config', () => {
  it.each([
    [{ adapter: 'gemini', model: 'm' }, 'routes.r.adapter'],
    [{ adapter: 'openai', model: '' }, 'routes.r.model'],
    [{ adapter: 'openai', model: 'm' }, 'routes.r.baseUrl'],
    [{ adapter: 'openai', model: 'm', baseUrl: 'not a url' }, 'routes.r.baseUrl'],
    [{ adapter: 'scripted', model: 'm' }, 'routes.r.scriptPath'],
    [{ adapter: 'anthropic', model: 'm', timeoutMs: -5 }, 'routes.r.timeoutMs'],
    [{ adapter: 'anthropic', model: 'm', apiKey: 'sk-inline' }, 'routes.r.apiKey'],
  ])('names the bad field %#', (route, field) => {
    expect(() => validateRoute('r', route)).toThrow(expect.objectContaining({ code: 'invalid_route', details: expect.objectContaining({ field }) }));
  });

  it('reads the API key from the named env variable and refuses a missing one', () => {
    expect(() => createModelClient('r', { adapter: 'anthropic', model: 'm', apiKeyEnv: 'NOPE_KEY' }, { env: {} })).toThrow(
      expect.objectContaining({ code: 'missing_api_key', details: expect.objectContaining({ field: 'routes.r.apiKeyEnv' }) }),
    );
    const client = createModelClient('r', { adapter: 'anthropic', model: 'm', apiKeyEnv: 'K' }, { env: { K: 'secret' } });
    expect(client.route).toEqual(routeIdentity('r', { adapter: 'anthropic', model: 'm', apiKeyEnv: 'K' }));
    expect(JSON.stringify(client.route)).not.toContain('secret');
  });

  it('swapping a route changes the adapter of the next call and nothing else', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'everdict-routes-'));
    writeFileSync(join(dir, 'a.json'), JSON.stringify({ steps: [{ text: 'from script' }] }));
    const router = new ModelRouter({ triage: { adapter: 'scripted', model: 'script-1', scriptPath: 'a.json' } }, { baseDir: dir });
    const before = router.client('triage');
    expect(before.route.adapter).toBe('scripted');
    const reply = await before.complete({ system: null, messages: [{ role: 'user', content: 'hi' }], tools: [] });
    expect(reply.output.text).toBe('from script');
    expect(router.client('triage')).toBe(before); // cached while the config is unchanged

    router.replace({ triage: { adapter: 'openai', model: 'gpt-x', baseUrl: 'http://127.0.0.1:9/v1' } });
    const after = router.client('triage');
    expect(after.route).toMatchObject({ name: 'triage', adapter: 'openai', model: 'gpt-x' });
    expect(after.route.configHash).not.toBe(before.route.configHash);
    expect(before.route.adapter).toBe('scripted'); // what served earlier calls stays recorded as it was
    expect(() => router.client('other')).toThrow(expect.objectContaining({ code: 'unknown_route' }));
  });
});
