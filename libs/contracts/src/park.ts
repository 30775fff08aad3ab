/**
 * Park classes (§11.4, D66): why a task waits, and what mechanically makes it runnable again.
 * This table is the only place that pairs a park reason with the events that end it: the
 * turn-worker's handlers, the sweeps (turn-worker and reconciler) and the store's wake
 * statements all read it, so a reason cannot be woken by one path and ignored by another.
 *
 * A wake cause says WHAT happened; whether it is the very thing a given task waits for (this
 * question, this gate, this packet) is the receiver's check against the task's park detail.
 * A class with no wake cause stays parked, visible, until an operator cancels it — a parked
 * task is never failed for waiting.
 */
import { EverdictError, isEverdictError } from './errors.js';
import type { RunnableReason } from './states.js';

/** TASKS.park_reason: the closed set of reasons a task waits for; its class decides what wakes it. */
export const PARK_REASONS = [
  'question',
  'gate',
  'sub_case',
  'connector_down',
  'provider_down',
  'budget',
  'capability_gap',
  'children',
  'consent',
  'capacity',
] as const;
export type ParkReason = (typeof PARK_REASONS)[number];

/** What can end a park. */
export const WAKE_CAUSES = [
  /** A human answered the question a root asked, or a parent the question its sub-agent asked. */
  'answer',
  /** The gate closed without approval (rejected, expired, revoked): the proposal was refused. */
  'gate_refused',
  /** A conclusive WhatLanded for the effect the task waits on (an unknown outcome is not one). */
  'effect_landed',
  /** An operator lifted the soft stop the task parked on at its checkpoint (§7). */
  'soft_stop_lifted',
  /** Every child has reported to the parent (its child_report note is recorded). */
  'children_reported',
  /** A sub-agent's question reached the parent: a question is never left behind its own wait. */
  'child_question',
  /** An operator raised the budget (§11.4: budget parks wake by top-up). */
  'top_up',
  /** Health-gated backoff: the park's timer elapsed, or its route answered since it parked. */
  'backoff',
  /** A role holder decided the consent gate the task's call waits on (approved, rejected, expired, revoked). */
  'consent_decided',
] as const;
export type WakeCause = (typeof WAKE_CAUSES)[number];

interface ParkClass {
  /** The causes that wake a task parked for this reason (empty: none does mechanically). */
  readonly wakes: readonly WakeCause[];
  /**
   * A backoff timer (`wake_at`) is armed with the park. Its detail survives the wake, so the
   * next park of the same class knows which attempt it is and doubles the backoff.
   */
  readonly timer: boolean;
}

export const PARK_CLASSES = {
  question: { wakes: ['answer'], timer: false },
  gate: { wakes: ['gate_refused', 'effect_landed', 'soft_stop_lifted'], timer: false },
  sub_case: { wakes: [], timer: false },
  connector_down: { wakes: ['backoff'], timer: true },
  provider_down: { wakes: ['backoff'], timer: true },
  budget: { wakes: ['top_up'], timer: false },
  capability_gap: { wakes: [], timer: false },
  children: { wakes: ['children_reported', 'child_question'], timer: false },
  consent: { wakes: ['consent_decided'], timer: false },
  // A per-case cap (§11.5) was full when the task was to run: it waits, never fails; the timer
  // retries the claim, which parks it again while the cap stays full.
  capacity: { wakes: ['backoff'], timer: true },
} as const satisfies Record<ParkReason, ParkClass>;

/** The `task.runnable` reason a woken task is nudged with, per cause. */
export const WAKE_RUNNABLE = {
  answer: 'answered',
  gate_refused: 'decided',
  effect_landed: 'outcome',
  soft_stop_lifted: 'woken',
  children_reported: 'child_finished',
  child_question: 'woken',
  top_up: 'woken',
  backoff: 'woken',
  consent_decided: 'decided',
} as const satisfies Record<WakeCause, RunnableReason>;

function classOf(reason: string | null): ParkClass | undefined {
  return reason !== null && Object.hasOwn(PARK_CLASSES, reason) ? PARK_CLASSES[reason as ParkReason] : undefined;
}

/** Whether `cause` wakes a task parked for `reason` (null or an unknown reason: never). */
export function wakes(reason: string | null, cause: WakeCause): boolean {
  return (classOf(reason)?.wakes as readonly WakeCause[] | undefined)?.includes(cause) ?? false;
}

/** The park reasons `cause` wakes, in PARK_REASONS order (what the wake statements filter on). */
export function wokenBy(cause: WakeCause): readonly ParkReason[] {
  return PARK_REASONS.filter((r) => wakes(r, cause));
}

/** Whether a park for `reason` arms a backoff timer. */
export function armsTimer(reason: string | null): boolean {
  return classOf(reason)?.timer ?? false;
}

/** The park reasons that arm a backoff timer, in PARK_REASONS order. */
export function timerReasons(): readonly ParkReason[] {
  return PARK_REASONS.filter((r) => armsTimer(r));
}

/**
 * The code a READ throws when a per-case cap holds it back before it started (a case type's
 * `caps.externalCallsPerMinute`). Like a down connector, nothing ran and nothing is the model's
 * to judge: the kernel leaves the call's intent open and suspends the run `capacity`; the host
 * parks it with a timer of `retryAfterMs` (when the window allows again), and the resumed turn
 * runs the read under the same call id.
 */
export const AT_CAPACITY = 'at_capacity';

/** What a capacity wait says: which cap, its limit, and when to try again. */
export interface CapacityWait {
  readonly cap: string;
  readonly limit: number;
  readonly retryAfterMs: number;
}

export class AtCapacity extends EverdictError {
  constructor(wait: CapacityWait) {
    super(AT_CAPACITY, `the case is at its ${wait.cap} cap (${wait.limit}); retry in ${wait.retryAfterMs} ms`, { retryable: true, details: { ...wait } });
  }
}

/** The capacity wait a read's failure is, or null when it is something else. */
export function capacityWait(err: unknown): CapacityWait | null {
  if (!isEverdictError(err, AT_CAPACITY)) return null;
  const { cap, limit, retryAfterMs } = err.details as Record<string, unknown>;
  if (typeof cap !== 'string' || typeof limit !== 'number' || typeof retryAfterMs !== 'number') return null;
  return { cap, limit, retryAfterMs: Math.max(0, retryAfterMs) };
}
