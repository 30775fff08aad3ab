import { describe, expect, it } from 'vitest';
import type { Settlement } from '@everdict/agent-runtime';
import { nextBackoffAttempt, settle } from '../src/decisions.js';
import type { SettleInput } from '../src/decisions.js';

const base: SettleInput = { settlement: null, cancelRequested: null, release: false, unreportedChildren: 0, route: 'main', backoffAttempt: 1, backoffMs: (n) => 100 * 2 ** (n - 1) };
const suspended = (parkReason: Extract<Settlement, { kind: 'suspended' }>['parkReason'], cause: Extract<Settlement, { kind: 'suspended' }>['cause']): Settlement => ({ kind: 'suspended', parkReason, cause, handoff: 'published' });

describe('what a committed turn does to its task', () => {
  it('goes on, releases at the cap, and parks at a soft cancel', () => {
    expect(settle(base)).toEqual({ kind: 'continue' });
    expect(settle({ ...base, release: true })).toEqual({ kind: 'release' });
    expect(settle({ ...base, cancelRequested: 'soft' })).toMatchObject({ kind: 'park', reason: 'gate', detail: { kind: 'soft_cancel' } });
  });

  it('finishes completed and failed runs', () => {
    expect(settle({ ...base, settlement: { kind: 'completed', result: 'ok' } })).toEqual({ kind: 'finish', state: 'done', summary: 'ok', failureCode: null });
    expect(settle({ ...base, settlement: { kind: 'failed', code: 'model_invalid_request', message: 'bad' } })).toMatchObject({ kind: 'finish', state: 'failed', failureCode: 'model_invalid_request' });
  });

  it('parks every suspension by its class and never fails a task for waiting', () => {
    expect(settle({ ...base, settlement: { kind: 'suspended', parkReason: 'budget', cause: 'budget_exhausted', handoff: 'published', budgetDimension: 'turns' } })).toMatchObject({ kind: 'park', reason: 'budget', detail: { handoff: 'published', dimension: 'turns' } });
    expect(settle({ ...base, settlement: suspended('question', 'wait') })).toMatchObject({ kind: 'park', reason: 'question', ask: true });
    expect(settle({ ...base, settlement: suspended('children', 'children'), unreportedChildren: 2 })).toMatchObject({ kind: 'park', reason: 'children', detail: { waitingFor: 2 } });
    expect(settle({ ...base, settlement: suspended('children', 'wait'), unreportedChildren: 0 })).toMatchObject({ kind: 'resume_now' });
    expect(settle({ ...base, settlement: suspended('provider_down', 'provider_down'), backoffAttempt: 3 })).toMatchObject({ kind: 'park', reason: 'provider_down', backoffMs: 400, detail: { route: 'main', attempt: 3 } });
    expect(settle({ ...base, settlement: { ...suspended('connector_down', 'connector_down'), connector: 'mcp:tickets' } as Settlement, backoffAttempt: 2 })).toMatchObject({
      kind: 'park',
      reason: 'connector_down',
      backoffMs: 200,
      detail: { connector: 'mcp:tickets', attempt: 2 },
    });
    // A per-case cap: the timer is the cap's own wait, never the doubling backoff.
    expect(settle({ ...base, settlement: { ...suspended('capacity', 'capacity'), capacity: { cap: 'externalCallsPerMinute', limit: 2, retryAfterMs: 4321 } } as Settlement, backoffAttempt: 3 })).toMatchObject({
      kind: 'park',
      reason: 'capacity',
      backoffMs: 4321,
      detail: { cap: 'externalCallsPerMinute', limit: 2 },
    });
  });

  it('counts backoff attempts from the previous park detail', () => {
    expect(nextBackoffAttempt(null, null)).toBe(1);
    expect(nextBackoffAttempt(null, { attempt: 2 })).toBe(3);
    expect(nextBackoffAttempt('question', { attempt: 2 })).toBe(1);
  });
});
