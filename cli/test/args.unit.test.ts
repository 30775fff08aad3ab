import { describe, expect, it } from 'vitest';
import { UsageError, parseInvocation } from '../src/args.js';
import { selectServices } from '../src/node/plan.js';

const present = (...vars: string[]) => (r: string) => vars.includes(r);

describe('cli arguments', () => {
  it('parses a command, --json and repeated --service', () => {
    expect(parseInvocation(['start', '--service', 'gate', '--service', 'reconciler', '--json'])).toMatchObject({ command: 'start', json: true, services: ['gate', 'reconciler'] });
    expect(parseInvocation([])).toMatchObject({ command: 'help', services: [] });
  });

  it('refuses unknown flags as a usage error', () => {
    expect(() => parseInvocation(['start', '--frobnicate'])).toThrow(UsageError);
  });

  it('names an unknown service, and what a named service lacks', () => {
    expect(selectServices(['billing'], present()).problems).toEqual([{ name: '--service', reason: expect.stringMatching(/unknown service "billing"/) as unknown }]);
    const both = selectServices(['gate', 'reconciler'], present('EVERDICT_CONFIG'));
    expect(both.services.map((s) => s.name)).toEqual(['gate', 'reconciler']);
    expect(both.problems).toEqual([]);
    expect(selectServices(['reconciler'], present()).problems).toEqual([{ name: 'EVERDICT_CONFIG', reason: expect.stringMatching(/required by reconciler/) as unknown }]);
  });

  it('refuses a node with nothing to run instead of idling ready', () => {
    const none = selectServices([], present());
    expect(none.services).toEqual([]);
    expect(none.problems).toEqual([{ name: '--service', reason: expect.stringMatching(/no service can run on this node: every service needs EVERDICT_CONFIG/) as unknown }]);
  });

  it('with no service named, runs the ones whose configuration is present', () => {
    const some = selectServices([], present('EVERDICT_CONFIG'));
    expect(some.problems).toEqual([]);
    expect(some.services.map((s) => s.name)).toEqual(['intake', 'turn-worker', 'gate', 'execution-coordinator', 'reconciler']);
    expect(some.skipped).toEqual([]);
  });
});
