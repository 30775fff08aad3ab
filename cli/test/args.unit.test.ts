import { describe, expect, it } from 'vitest';
import { UsageError, parseInvocation } from '../src/args.js';
import { selectServices } from '../src/start.js';

describe('cli arguments', () => {
  it('parses a command, --json and repeated --service', () => {
    expect(parseInvocation(['start', '--service', 'gate', '--service', 'reconciler', '--json'])).toMatchObject({ command: 'start', json: true, services: ['gate', 'reconciler'] });
    expect(parseInvocation([])).toMatchObject({ command: 'help', services: [] });
  });

  it('refuses unknown flags as a usage error', () => {
    expect(() => parseInvocation(['start', '--frobnicate'])).toThrow(UsageError);
  });

  it('names an unknown or unavailable service', () => {
    expect(() => selectServices(['billing'])).toThrow(/unknown service "billing"/);
    expect(selectServices(['gate', 'reconciler']).services.map((s) => s.name)).toEqual(['gate', 'reconciler']);
  });

  it('with no service named, runs the available ones whose configuration is present', () => {
    expect(selectServices([], {}).services).toEqual([]);
    const some = selectServices([], { EVERDICT_CONFIG: '/etc/fleet.json' });
    expect(some.services.map((s) => s.name)).toEqual(['intake', 'turn-worker', 'gate']);
    expect(some.skipped).toEqual([
      { name: 'execution-coordinator', missing: ['EVERDICT_CONNECTORS'] },
      { name: 'reconciler', missing: ['EVERDICT_CONNECTORS'] },
    ]);
  });
});
