/**
 * What a committed turn does to its task — pure decisions over the kernel's settlement, a pending
 * cancel and the activation's turn cap (seed 004 §11.4, K5):
 *
 *   completed                  → done, task.finished to the parent
 *   failed                     → failed, task.finished (failureCode)
 *   suspended budget           → parked budget (never done), handoff fate recorded
 *   suspended question         → parked question: the root asks a human (a QUESTIONS row), a
 *                                sub-agent its parent (question.raised) — §11.3
 *   suspended children         → parked children, unless none is running (then it goes on)
 *   … answering sub-agents     → the same park, through the question protocol (`ask`): the
 *                                answers go out with it, each to the one child that asked
 *   suspended provider_down    → parked provider_down with a backoff timer (health-gated wake)
 *   suspended connector_down   → parked connector_down with a backoff timer: a read's server or
 *                                target could not answer (the read runs again when it wakes)
 *   suspended capacity         → parked capacity with a timer until the per-case cap allows
 *                                (the read runs again when it wakes)
 *   not settled, soft cancel   → parked gate (an operator decides; soft stop at the checkpoint)
 *   not settled, cap/draining  → released (open) with a task.runnable to itself
 *   not settled                → the activation continues
 * A parked task is never failed for waiting.
 */
import type { ParkReason } from '@everdict/contracts';
import type { Settlement } from '@everdict/agent-runtime';

export type Transition =
  | { readonly kind: 'continue' }
  | { readonly kind: 'finish'; readonly state: 'done' | 'failed' | 'cancelled'; readonly summary: string; readonly failureCode: string | null }
  /**
   * `ask`: the park goes through the question protocol — it puts the task's question (to its
   * parent, or a human at the root) and/or answers its sub-agents' questions — so it commits as a
   * unit of work, never on the group-commit hot path.
   */
  | { readonly kind: 'park'; readonly reason: ParkReason; readonly detail: Readonly<Record<string, unknown>>; readonly backoffMs: number | null; readonly ask: boolean }
  | { readonly kind: 'resume_now'; readonly note: string }
  | { readonly kind: 'release' };

export interface SettleInput {
  readonly settlement: Settlement | null;
  readonly cancelRequested: 'hard' | 'soft' | null;
  /** Cap reached or the process is draining: give the task back instead of running on. */
  readonly release: boolean;
  /** Children of the task whose report has not arrived (asked only for a children suspension). */
  readonly unreportedChildren: number;
  readonly route: string;
  /** The backoff attempt (provider_down, connector_down) this park would be (1 for the first). */
  readonly backoffAttempt: number;
  readonly backoffMs: (attempt: number) => number;
}

const MAX_SUMMARY = 4000;

export function settle(i: SettleInput): Transition {
  const s = i.settlement;
  if (s === null) {
    if (i.cancelRequested === 'soft') return { kind: 'park', reason: 'gate', detail: { kind: 'soft_cancel' }, backoffMs: null, ask: false };
    return i.release ? { kind: 'release' } : { kind: 'continue' };
  }
  switch (s.kind) {
    case 'completed':
      return { kind: 'finish', state: 'done', summary: (s.result ?? '').slice(0, MAX_SUMMARY), failureCode: null };
    case 'failed':
      return { kind: 'finish', state: 'failed', summary: s.message.slice(0, MAX_SUMMARY), failureCode: s.code };
    case 'suspended': {
      const base = { handoff: s.handoff, cause: s.cause };
      switch (s.parkReason) {
        case 'budget':
          return { kind: 'park', reason: 'budget', detail: { ...base, dimension: s.budgetDimension ?? null }, backoffMs: null, ask: false };
        case 'question':
          return { kind: 'park', reason: 'question', detail: base, backoffMs: null, ask: true };
        case 'children':
          if (i.unreportedChildren === 0) return { kind: 'resume_now', note: 'None of your sub-agents is still running; every report you will get has arrived.' };
          return { kind: 'park', reason: 'children', detail: { ...base, waitingFor: i.unreportedChildren }, backoffMs: null, ask: (s.answers ?? 0) > 0 };
        case 'provider_down':
          return { kind: 'park', reason: 'provider_down', detail: { ...base, route: i.route, attempt: i.backoffAttempt }, backoffMs: i.backoffMs(i.backoffAttempt), ask: false };
        case 'connector_down':
          return { kind: 'park', reason: 'connector_down', detail: { ...base, connector: s.connector ?? null, attempt: i.backoffAttempt }, backoffMs: i.backoffMs(i.backoffAttempt), ask: false };
        case 'capacity':
          // Until the cap's window allows again; no doubling: the wait is known, not guessed.
          return { kind: 'park', reason: 'capacity', detail: { ...base, cap: s.capacity?.cap ?? null, limit: s.capacity?.limit ?? null }, backoffMs: Math.max(1, s.capacity?.retryAfterMs ?? 1000), ask: false };
        default:
          return { kind: 'park', reason: s.parkReason, detail: base, backoffMs: null, ask: false };
      }
    }
  }
}

/**
 * The backoff attempt a new park is, from the task's previous park detail (a timer park's detail
 * survives its wake): a task that keeps meeting a down provider or connector backs off further.
 */
export function nextBackoffAttempt(previousParkReason: string | null, previousDetail: unknown): number {
  const prior = (previousDetail as { attempt?: unknown } | null)?.attempt;
  return previousParkReason === null && typeof prior === 'number' && Number.isSafeInteger(prior) ? prior + 1 : 1;
}

/**
 * What an operator's resume does to a task (§7: the way back from a soft stop):
 *   finished, or hard-cancelled    → nothing (a hard cancel is final)
 *   parked on its soft stop        → withdraw the request and wake it
 *   soft stop requested, not yet   → withdraw the request (it will not park at its checkpoint)
 *   anything else                  → nothing
 */
type ResumeAction = 'wake' | 'withdraw' | 'nothing';

export function resumeAction(t: { readonly state: string; readonly park_reason: string | null; readonly park_detail: unknown; readonly cancel_requested: 'hard' | 'soft' | null }): ResumeAction {
  if (t.state === 'done' || t.state === 'failed' || t.state === 'cancelled' || t.cancel_requested === 'hard') return 'nothing';
  if (t.state === 'parked' && t.park_reason === 'gate' && (t.park_detail as { kind?: unknown } | null)?.kind === 'soft_cancel') return 'wake';
  return t.cancel_requested === 'soft' ? 'withdraw' : 'nothing';
}
