/**
 * Costs and budgets (seed 004 §8, §11.5): what a model call cost as the provider measured it,
 * and the delivery minutes a task spent running and waiting.
 *
 * A cost row is written by the statement that records the model call's response (writeJournals,
 * `usage` on the completion), so a call is never answered without its cost nor charged twice.
 * Unknown stays unknown: a provider that did not report a value leaves it NULL, and a total over
 * rows of which one is unknown is itself unknown (never a sum that silently treats it as 0).
 * Delivery minutes are charged by the database at each task state change (migration 0010).
 */
import type { Queryable, Sql } from './db.js';

/** The measured usage a model call's completion carries into `cost_ledger`. */
export interface ModelCallCost {
  /** The cost row's id (allocated by the caller, so a redone write inserts the same row). */
  readonly costId: string;
  /** The model that answered (the provider's word, else the route's configured model). */
  readonly model: string;
  readonly inputTokens: number | null;
  readonly outputTokens: number | null;
  /** Provider-reported cost in the provider's currency unit; null when it reported none. */
  readonly cost: number | null;
}

/** Per task: tokens and cost of its model calls, and its running/waiting minutes. */
export interface TaskCostRow {
  task_id: string;
  parent_id: string | null;
  model_calls: number;
  /** NULL when any of the task's calls has the value unknown (or it made no call: 0). */
  input_tokens: string | null;
  output_tokens: string | null;
  cost: string | null;
  /** Calls whose value the provider did not report. */
  unknown_tokens: number;
  unknown_cost: number;
  active_minutes: string;
  waiting_minutes: string;
}

/**
 * Every task of a case with its costs. Minutes include the stretch still open (a task running
 * or parked now is charged up to the database's now, without writing anything).
 */
export function selectCaseCosts(caseId: string): Sql {
  return {
    name: 'ev_case_costs',
    text: `SELECT t.id AS task_id, t.parent_id,
                  count(c.id)::int AS model_calls,
                  CASE WHEN bool_or(c.id IS NOT NULL AND c.input_tokens IS NULL) THEN NULL ELSE COALESCE(sum(c.input_tokens), 0) END::text AS input_tokens,
                  CASE WHEN bool_or(c.id IS NOT NULL AND c.output_tokens IS NULL) THEN NULL ELSE COALESCE(sum(c.output_tokens), 0) END::text AS output_tokens,
                  CASE WHEN bool_or(c.id IS NOT NULL AND c.cost IS NULL) THEN NULL ELSE COALESCE(sum(c.cost), 0) END::text AS cost,
                  count(c.id) FILTER (WHERE c.input_tokens IS NULL OR c.output_tokens IS NULL)::int AS unknown_tokens,
                  count(c.id) FILTER (WHERE c.cost IS NULL)::int AS unknown_cost,
                  (t.budget_used_minutes + CASE WHEN t.state = 'running' AND t.running_since IS NOT NULL
                                               THEN extract(epoch FROM now() - t.running_since) / 60 ELSE 0 END)::text AS active_minutes,
                  (t.waiting_minutes + CASE WHEN t.state = 'parked' AND t.parked_at IS NOT NULL
                                           THEN extract(epoch FROM now() - t.parked_at) / 60 ELSE 0 END)::text AS waiting_minutes
             FROM tasks t LEFT JOIN cost_ledger c ON c.task_id = t.id
            WHERE t.case_id = $1::uuid
            GROUP BY t.id
            ORDER BY t.created_at, t.id`,
    values: [caseId],
  };
}

export async function loadCaseCosts(q: Queryable, caseId: string): Promise<TaskCostRow[]> {
  return (await q.query<TaskCostRow>(selectCaseCosts(caseId))).rows;
}

/** Totals as the case view shows them: `null` = unknown (some call did not report it). */
export interface CostTotals {
  readonly modelCalls: number;
  readonly inputTokens: number | null;
  readonly outputTokens: number | null;
  readonly cost: number | null;
  readonly activeMinutes: number;
  readonly waitingMinutes: number;
}

const num = (v: string | null) => (v === null ? null : Number(v));
/** Unknown absorbs: a sum with one unknown term is unknown. */
const plus = (a: number | null, b: number | null) => (a === null || b === null ? null : a + b);

export function taskCost(r: TaskCostRow): CostTotals {
  return {
    modelCalls: r.model_calls,
    inputTokens: num(r.input_tokens),
    outputTokens: num(r.output_tokens),
    cost: num(r.cost),
    activeMinutes: Number(r.active_minutes),
    waitingMinutes: Number(r.waiting_minutes),
  };
}

export const ZERO_COST: CostTotals = { modelCalls: 0, inputTokens: 0, outputTokens: 0, cost: 0, activeMinutes: 0, waitingMinutes: 0 };

export function addCosts(a: CostTotals, b: CostTotals): CostTotals {
  return {
    modelCalls: a.modelCalls + b.modelCalls,
    inputTokens: plus(a.inputTokens, b.inputTokens),
    outputTokens: plus(a.outputTokens, b.outputTokens),
    cost: plus(a.cost, b.cost),
    activeMinutes: a.activeMinutes + b.activeMinutes,
    waitingMinutes: a.waitingMinutes + b.waitingMinutes,
  };
}
