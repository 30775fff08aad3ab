import { describe, expect, it } from 'vitest';
import { armsTimer, PARK_CLASSES, PARK_REASONS, RUNNABLE_REASONS, stopAfter, timerReasons, WAKE_CAUSES, WAKE_RUNNABLE, wakes, wokenBy } from '../src/index.js';
import type { ParkReason, WakeCause } from '../src/index.js';

describe('park classes: what wakes each park reason', () => {
  // The whole table, spelled out: a change to what wakes a park shows up here as a diff.
  const expected: Record<ParkReason, readonly WakeCause[]> = {
    question: ['answer'],
    gate: ['gate_refused', 'effect_landed', 'soft_stop_lifted'],
    sub_case: [],
    connector_down: ['backoff'],
    provider_down: ['backoff'],
    budget: ['top_up'],
    capability_gap: [],
    children: ['children_reported', 'child_question'],
    consent: ['consent_decided'],
    capacity: ['backoff'],
  };

  it('has exactly one class per park reason', () => {
    expect(Object.keys(PARK_CLASSES).sort()).toEqual([...PARK_REASONS].sort());
  });

  it.each(PARK_REASONS.flatMap((r) => WAKE_CAUSES.map((c) => [r, c] as const)))('%s woken by %s', (reason, cause) => {
    expect(wakes(reason, cause)).toBe(expected[reason].includes(cause));
  });

  it('every cause wakes some park, and wokenBy lists them in PARK_REASONS order', () => {
    for (const cause of WAKE_CAUSES) {
      const reasons = wokenBy(cause);
      expect(reasons.length, cause).toBeGreaterThan(0);
      expect(reasons).toEqual(PARK_REASONS.filter((r) => expected[r].includes(cause)));
    }
    expect(wokenBy('backoff')).toEqual(['connector_down', 'provider_down', 'capacity']);
    expect(wokenBy('child_question')).toEqual(['children']);
  });

  it('no reason, or one outside the set, is woken by anything', () => {
    for (const cause of WAKE_CAUSES) {
      expect(wakes(null, cause)).toBe(false);
      expect(wakes('bored', cause)).toBe(false);
      expect(wakes('toString', cause)).toBe(false);
    }
    expect(armsTimer(null)).toBe(false);
    expect(armsTimer('constructor')).toBe(false);
  });

  it('a timer is armed exactly by the classes the backoff wakes', () => {
    expect(timerReasons()).toEqual(['connector_down', 'provider_down', 'capacity']);
    for (const r of PARK_REASONS) expect(armsTimer(r), r).toBe(wakes(r, 'backoff'));
  });

  it('each cause nudges the woken task with a task.runnable reason', () => {
    expect(Object.keys(WAKE_RUNNABLE).sort()).toEqual([...WAKE_CAUSES].sort());
    for (const cause of WAKE_CAUSES) expect(RUNNABLE_REASONS).toContain(WAKE_RUNNABLE[cause]);
    expect(WAKE_RUNNABLE).toMatchObject({ answer: 'answered', gate_refused: 'decided', effect_landed: 'outcome', children_reported: 'child_finished' });
  });
});

describe('the case stop', () => {
  it('never weakens: hard stays hard, soft strengthens to hard', () => {
    expect(stopAfter(null, 'soft')).toBe('soft');
    expect(stopAfter(null, 'hard')).toBe('hard');
    expect(stopAfter('soft', 'soft')).toBe('soft');
    expect(stopAfter('soft', 'hard')).toBe('hard');
    expect(stopAfter('hard', 'soft')).toBe('hard');
    expect(stopAfter('hard', 'hard')).toBe('hard');
  });
});
