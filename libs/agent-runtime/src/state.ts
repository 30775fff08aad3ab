/**
 * The restorable state of one run, and how a run ends. `RunState` is plain JSON: the
 * turn-worker stores it as the checkpoint's state paper and hands it back to `runTurn` to run
 * the next turn, possibly in another process. Nothing the kernel needs between turns lives
 * outside it.
 */
import { ZERO_USAGE, type BudgetUsage, type BudgetDimension, type CapacityWait, type ExecutionEnvelope, type ExecutionMode, type ParkReason } from '@everdict/contracts';
import type { ChatMessage } from '@everdict/llm';
import type { ModelErrorKind } from '@everdict/llm';

export type TodoStatus = 'pending' | 'in_progress' | 'done';

export interface TodoItem {
  readonly id: string;
  readonly text: string;
  readonly status: TodoStatus;
}

export interface PlanStepDraft {
  readonly id: string;
  readonly title: string;
  readonly dependsOn: readonly string[];
}

/** The plan the agent drafted with the `plan` tool; the host turns it into a plan revision. */
export interface PlanDraft {
  readonly revision: number;
  readonly steps: readonly PlanStepDraft[];
  readonly note: string | null;
}

/** A question that parks only this task (gap / checked / depends-on / alternatives / decision). */
export interface WaitQuestion {
  readonly gap: string;
  readonly checked: string;
  readonly dependsOn: string;
  readonly alternatives: readonly string[];
  readonly decisionNeeded: string;
}

/**
 * A parent's answer to a question one of its sub-agents put to it (§11.3: a child asks its
 * parent, never a human). The host delivers it to exactly the sub-agent parked on that question.
 */
export interface ChildAnswer {
  readonly questionId: string;
  readonly answer: string;
}

/** Armed by `wait`: the run settles SUSPENDED after the turn's calls finish. */
export interface ArmedWait {
  readonly for: 'question' | 'children';
  readonly reason: string;
  readonly question: WaitQuestion | null;
  /** Answers to sub-agents' questions this wait gives (absent: none). */
  readonly answers?: readonly ChildAnswer[];
}

export interface ChildRecord {
  readonly childTaskId: string;
  readonly spawnCallId: string;
  readonly objective: string;
  readonly status: 'running' | 'settled';
}

export type Settlement =
  | { readonly kind: 'completed'; readonly result: string | null }
  /**
   * A halt that owes a handoff (K5): budget exhaustion, an armed wait, waiting children, a
   * provider or a read's connector that is down, a read waiting for consent, a context the
   * provider says is too long (compaction, not failure). Never `completed`.
   * `handoff` is what really happened to the checkpoint.
   */
  | {
      readonly kind: 'suspended';
      readonly parkReason: ParkReason;
      readonly cause: 'budget_exhausted' | 'wait' | 'children' | 'provider_down' | 'connector_down' | 'consent' | 'capacity' | 'context_too_long';
      readonly budgetDimension?: BudgetDimension;
      /** The connector (an MCP server, a connector) a `connector_down` halt waits on. */
      readonly connector?: string;
      /** The per-case cap a `capacity` halt waits on, and when it allows again. */
      readonly capacity?: CapacityWait;
      readonly handoff: 'published' | 'failed' | 'absent';
      /** How many sub-agent questions the halting `wait` answers (absent: none); the host delivers them with the park. */
      readonly answers?: number;
    }
  /** The model cannot be asked this request again as-is (an invalid request). */
  | { readonly kind: 'failed'; readonly code: `model_${ModelErrorKind}` | 'kernel_error'; readonly message: string };

export interface RunState {
  readonly taskId: string;
  /** The next turn to run (0-based). */
  readonly turn: number;
  readonly objective: string;
  readonly messages: readonly ChatMessage[];
  readonly todos: readonly TodoItem[];
  readonly plan: PlanDraft | null;
  readonly wait: ArmedWait | null;
  readonly children: readonly ChildRecord[];
  readonly usage: BudgetUsage;
  readonly settlement: Settlement | null;
}

/** What a run executes under; restored from the task row, not from the checkpoint. */
export interface RunContext {
  readonly taskId: string;
  readonly systemPrompt: string | null;
  readonly envelope: ExecutionEnvelope;
  /** Absent = live, byte-identical to before modes existed. */
  readonly mode?: ExecutionMode;
  /** 0 for a root run. */
  readonly depth: number;
  readonly maxOutputTokens?: number;
}

/** A fresh run: the objective is the first user message; usage counts from zero (K4). */
export function initialRunState(taskId: string, objective: string): RunState {
  // Keys in canonical (RFC 8785) order: every later state is a spread of this one, which keeps
  // the order, and the checkpoint canonicalises it every turn (one JSON.stringify pass when in order).
  return {
    children: [],
    messages: [{ content: objective, role: 'user' }],
    objective,
    plan: null,
    settlement: null,
    taskId,
    todos: [],
    turn: 0,
    usage: ZERO_USAGE,
    wait: null,
  };
}
