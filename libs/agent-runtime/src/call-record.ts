/**
 * What the journal keeps as a tool call's response, and how a recorded intrinsic effect is
 * folded into the run state. Replaying a turn folds the recorded effect instead of running the
 * call again: a completed call with no checkpoint is folded in, never executed twice.
 */
import type { KernelRefusal, ToolOutcome } from '@everdict/contracts';
import type { ArmedWait, ChildRecord, PlanDraft, RunState, TodoItem } from './state.js';

export type IntrinsicEffect =
  | { readonly kind: 'todo'; readonly items: readonly TodoItem[] }
  | { readonly kind: 'plan'; readonly plan: PlanDraft }
  | { readonly kind: 'wait'; readonly wait: ArmedWait }
  | { readonly kind: 'child'; readonly child: ChildRecord; readonly deferred: boolean };

export interface ToolCallRecord {
  /** Exactly what the model is shown as the tool message. */
  readonly content: string;
  readonly outcome: ToolOutcome;
  readonly refusal: KernelRefusal | null;
  readonly offloadedRef: string | null;
  readonly effect: IntrinsicEffect | null;
}

export function foldEffect(state: RunState, effect: IntrinsicEffect | null): RunState {
  if (effect === null) return state;
  switch (effect.kind) {
    case 'todo':
      return { ...state, todos: effect.items };
    case 'plan':
      return { ...state, plan: effect.plan };
    case 'wait':
      return { ...state, wait: effect.wait };
    case 'child':
      return { ...state, children: [...state.children.filter((c) => c.spawnCallId !== effect.child.spawnCallId), effect.child] };
  }
}
