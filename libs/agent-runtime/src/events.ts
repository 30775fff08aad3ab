/**
 * Facts the kernel reports for one turn. They are returned with the turn's result so the host
 * commits them with the checkpoint (never emitted ahead of the state they describe). Events
 * carry safe ids, names and categories; arguments appear only in `shadow_intent`, whose whole
 * purpose is to show what would have been done.
 */
import type { BudgetDimension, KernelRefusal, ToolOutcome } from '@everdict/contracts';
import type { ModelErrorKind, ModelUsage, RouteIdentity } from '@everdict/llm';
import type { ActionProblem } from './action-document.js';
import type { PlanDraft, Settlement } from './state.js';

export type KernelEvent =
  | {
      readonly type: 'model_call';
      readonly turn: number;
      readonly callId: string;
      readonly route: RouteIdentity;
      readonly usage: ModelUsage;
      /** true when the journal already held the response and the model was not asked again. */
      readonly replayed: boolean;
      readonly attempts: number;
    }
  | { readonly type: 'model_error'; readonly turn: number; readonly callId: string; readonly kind: ModelErrorKind; readonly reason: string; readonly attempt: number; readonly retryAfterMs?: number }
  | { readonly type: 'action_rejected'; readonly turn: number; readonly problems: readonly ActionProblem[] }
  | {
      /** K8: the attribution of every call's fate. Withheld calls have isError and a refusal. */
      readonly type: 'tool_result';
      readonly turn: number;
      readonly callId: string;
      readonly ordinal: number;
      readonly tool: string;
      readonly isError: boolean;
      readonly outcome: ToolOutcome;
      readonly refusal: KernelRefusal | null;
      readonly replayed: boolean;
      readonly offloadedRef: string | null;
    }
  | { readonly type: 'shadow_intent'; readonly turn: number; readonly callId: string; readonly tool: string; readonly arguments: Readonly<Record<string, unknown>> }
  | { readonly type: 'plan_drafted'; readonly turn: number; readonly plan: PlanDraft }
  | { readonly type: 'child_spawned'; readonly turn: number; readonly callId: string; readonly childTaskId: string; readonly deferred: boolean }
  | { readonly type: 'budget_exhausted'; readonly turn: number; readonly dimension: BudgetDimension; readonly limit: number; readonly used: number }
  | { readonly type: 'settled'; readonly turn: number; readonly settlement: Settlement };
