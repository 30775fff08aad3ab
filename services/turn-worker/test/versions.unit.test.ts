import { describe, expect, it } from 'vitest';
import { routeIdentity } from '@everdict/llm';
import { changedVersions, decideVersions, DEFAULT_VERSION_POLICY, versionsOf } from '../src/versions.js';

const tools: { name: string; description: string; inputSchema: Record<string, unknown> }[] = [{ name: 'lookup', description: 'look', inputSchema: { type: 'object' } }];
const v = (o: { prompt?: string; route?: string; model?: string; version?: string; tools?: typeof tools } = {}) =>
  versionsOf({ profile: 'agent', profileVersion: o.version ?? '1', prompt: o.prompt ?? 'p', route: routeIdentity(o.route ?? 'a', { adapter: 'scripted', model: o.model ?? 'm', scriptPath: 's.json' }), tools: o.tools ?? tools });

describe('versions', () => {
  it('names exactly the fields that changed', () => {
    expect(changedVersions(v(), v())).toEqual([]);
    expect(changedVersions(v(), v({ route: 'b' }))).toEqual(['route']);
    expect(changedVersions(v(), v({ model: 'other' }))).toEqual(['route']);
    expect(changedVersions(v(), v({ prompt: 'q', version: '2' }))).toEqual(['profile', 'prompt']);
    expect(changedVersions(v(), v({ tools: [{ ...tools[0]!, inputSchema: { type: 'object', required: ['q'] } }] }))).toEqual(['tools']);
  });

  it('continues route and runtime swaps; a changed agent waits for an operator', () => {
    expect(decideVersions(DEFAULT_VERSION_POLICY, ['route'])).toBe('continue');
    expect(decideVersions(DEFAULT_VERSION_POLICY, ['route', 'runtime'])).toBe('continue');
    expect(decideVersions(DEFAULT_VERSION_POLICY, ['route', 'prompt'])).toBe('park');
    expect(decideVersions({ ...DEFAULT_VERSION_POLICY, tools: 'continue' }, ['tools'])).toBe('continue');
  });
});
