/** Post-state reads (seed 004 §7): binding, the exact-match judgement, and the connector's review of the declaration. */
import { describe, expect, it } from 'vitest';
import { HttpServiceConnector, bindPostState, postStateHolds } from '../src/index.js';
import type { HttpServiceConfig } from '../src/index.js';

const config = (postState: unknown): HttpServiceConfig =>
  ({
    name: 'flags',
    target: { system: 'flags', environment: 'test' },
    baseUrl: 'http://127.0.0.1:1/api',
    operations: [
      { name: 'flags.set', kind: 'mutate', method: 'PUT', path: '/flags/{flagId}', body: { value: '{{value}}' }, params: { flagId: { type: 'string' }, value: { type: 'string' } }, effectClass: 'payment', postState },
      { name: 'flags.get', kind: 'read', method: 'GET', path: '/flags/{flagId}', params: { flagId: { type: 'string' } } },
    ],
  }) as HttpServiceConfig;

describe('post-state', () => {
  const spec = { read: 'flags.get', params: { flagId: '{{flagId}}' }, pointer: '/body/value', equals: '{{value}}' };
  it('binds exactly "{{param}}" strings from the write and judges only an exact match as holding', () => {
    const bound = bindPostState(spec, { flagId: 'f1', value: 'on' });
    expect(bound).toEqual({ params: { flagId: 'f1' }, equals: 'on' });
    expect(postStateHolds({ status: 200, body: { value: 'on' } }, spec.pointer, bound.equals)).toEqual({ holds: true, observed: 'on' });
    expect(postStateHolds({ status: 200, body: { value: 'off' } }, spec.pointer, bound.equals).holds).toBe(false);
    expect(postStateHolds({ status: 404, body: { error: 'no_such_flag' } }, spec.pointer, bound.equals)).toEqual({ holds: false, observed: null });
  });
  it('a connector without receipts starts; a post-state naming no registered read or a foreign placeholder does not', () => {
    expect(new HttpServiceConnector(config(spec)).describe()).toMatchObject({ whatLandedConclusive: false });
    expect(() => new HttpServiceConnector(config({ ...spec, read: 'flags.list' }))).toThrow(/postState read "flags.list" is not a registered read/);
    expect(() => new HttpServiceConnector(config({ ...spec, equals: '{{other}}' }))).toThrow(/postState placeholder "other"/);
  });
});
