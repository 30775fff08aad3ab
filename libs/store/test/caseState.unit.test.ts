import { describe, expect, it } from 'vitest';
import { CASE_STATES } from '@everdict/contracts';
import { unchangedBy } from '../src/caseState.js';

describe('which causes leave a case state where it is without deriving it', () => {
  it('a claim or a wake of a running case keeps it running', () => {
    expect(unchangedBy('task_claimed', 'running')).toBe(true);
    expect(unchangedBy('task_woken:answer', 'running')).toBe(true);
  });

  it('every other state, and every other cause, is derived again', () => {
    for (const s of CASE_STATES.filter((x) => x !== 'running')) {
      expect(unchangedBy('task_claimed', s), s).toBe(false);
      expect(unchangedBy('task_woken:backoff', s), s).toBe(false);
    }
    for (const cause of ['task_done', 'task_parked:question', 'gate_opened', 'capacity_parked', 'dispatch_settled']) expect(unchangedBy(cause, 'running'), cause).toBe(false);
  });
});
