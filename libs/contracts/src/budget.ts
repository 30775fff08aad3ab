/**
 * Per-run budget (K5). Exhaustion SUSPENDS a run (parked `budget`) with a handoff; it never
 * completes it. A child run counts its usage from zero under its parent's budget limits.
 * Token usage counts only what a provider measured: an unmeasured call adds nothing to the
 * token total and is counted separately, so a total is never presented as more than it is.
 */
import { EverdictError } from './errors.js';

/** Absent limits are unlimited. */
export interface RunBudget {
  readonly maxTurns?: number;
  readonly maxToolCalls?: number;
  readonly maxTokens?: number;
  /** Delivery-time minutes of active execution (D135); parked time is not charged. */
  readonly maxActiveMinutes?: number;
}

export interface BudgetUsage {
  readonly turns: number;
  readonly toolCalls: number;
  /** Sum of provider-measured input + output tokens. */
  readonly measuredTokens: number;
  /** Model calls whose usage the provider did not report. */
  readonly unmeasuredModelCalls: number;
  readonly activeMs: number;
}

// Keys in canonical (RFC 8785) order: usage is copied turn to turn by spreads, which keep this
// order, into the checkpointed state the hot path canonicalises in one pass (jcs.ts).
export const ZERO_USAGE: BudgetUsage = Object.freeze({ activeMs: 0, measuredTokens: 0, toolCalls: 0, turns: 0, unmeasuredModelCalls: 0 });

export const BUDGET_DIMENSIONS = ['turns', 'toolCalls', 'tokens', 'activeMinutes'] as const;
export type BudgetDimension = (typeof BUDGET_DIMENSIONS)[number];

type BudgetVerdict =
  | { readonly exhausted: false }
  | { readonly exhausted: true; readonly dimension: BudgetDimension; readonly limit: number; readonly used: number };

/** Exhausted when any limited dimension has reached its limit. */
export function budgetExhausted(budget: RunBudget, usage: BudgetUsage): BudgetVerdict {
  const checks: [BudgetDimension, number | undefined, number][] = [
    ['turns', budget.maxTurns, usage.turns],
    ['toolCalls', budget.maxToolCalls, usage.toolCalls],
    ['tokens', budget.maxTokens, usage.measuredTokens],
    ['activeMinutes', budget.maxActiveMinutes, usage.activeMs / 60_000],
  ];
  for (const [dimension, limit, used] of checks) {
    if (limit !== undefined && used >= limit) return { exhausted: true, dimension, limit, used };
  }
  return { exhausted: false };
}

/** Shape check for budgets from config or spawn requests; the error names the field. */
export function validateRunBudget(budget: unknown, field = 'budget'): RunBudget {
  if (budget === null || typeof budget !== 'object' || Array.isArray(budget)) {
    throw new EverdictError('invalid_budget', `${field} must be an object`, { details: { field } });
  }
  const b = budget as Record<string, unknown>;
  for (const key of ['maxTurns', 'maxToolCalls', 'maxTokens', 'maxActiveMinutes']) {
    const v = b[key];
    if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v) || v < 0)) {
      throw new EverdictError('invalid_budget', `${field}.${key} must be a non-negative number`, { details: { field: `${field}.${key}` } });
    }
  }
  return b as RunBudget;
}
