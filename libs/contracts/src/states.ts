/**
 * Closed state sets of the engine. Each is an `as const` tuple plus its derived union. The
 * store's migrations spell the same values out literally in CHECK constraints (a released
 * migration never changes), and libs/store's migrate test fails, naming the list, while a tuple
 * here and the migrated schema disagree: a new value needs a new migration.
 */

/** TASKS.state (§11.1): the closed engine states. Modules extend outcomes, never this list. */
export const TASK_STATES = ['open', 'running', 'parked', 'done', 'failed', 'cancelled'] as const;
export type TaskState = (typeof TASK_STATES)[number];

/** RUNTIME_CALLS.status: the journal's view of one model or tool call. */
export const CALL_STATUSES = ['intent', 'completed', 'failed', 'unknown', 'refused', 'shadowed'] as const;
export type CallStatus = (typeof CALL_STATUSES)[number];

/** Connector answer to "what landed?" (§7). Only `unknown` is inconclusive. */
export const WHAT_LANDED = ['applied', 'not_applied', 'partly_applied', 'unknown'] as const;
export type WhatLanded = (typeof WHAT_LANDED)[number];

/**
 * CASES.state (§11.1 state table), derived from committed task, gate and dispatch records
 * (libs/store caseState): opened (stored, no task has run) · running (a task active) · parked
 * (every task waits; the reason class in CASES.state_reason) · at_gate (a human decision open) ·
 * held (approved work waiting for execution) · resolved (the root done and every write verified)
 * · closed (by the customer only) · cancelled (hard cancel). Cases never expire.
 */
export const CASE_STATES = ['opened', 'running', 'parked', 'at_gate', 'held', 'resolved', 'closed', 'cancelled'] as const;
export type CaseState = (typeof CASE_STATES)[number];

/** GATES.state. */
export const GATE_STATES = ['open', 'approved', 'rejected', 'expired', 'revoked'] as const;
export type GateState = (typeof GATE_STATES)[number];

/** GRANTS.state: a grant is reserved by exactly one journal call, then consumed. */
export const GRANT_STATES = ['issued', 'reserved', 'consumed', 'expired', 'revoked'] as const;
export type GrantState = (typeof GRANT_STATES)[number];

/** Verdict a role holder gives on one decision. */
export const VERDICTS = ['approve', 'reject'] as const;
export type Verdict = (typeof VERDICTS)[number];

/** INBOX_MESSAGES.disposition: what the consumer did with a delivery. */
export const INBOX_DISPOSITIONS = ['applied', 'ignored', 'refused'] as const;
export type InboxDisposition = (typeof INBOX_DISPOSITIONS)[number];

/** Trust label stamped on every envelope by the runtime (§4). */
export const TRUST_LABELS = ['platform', 'agent', 'external'] as const;
export type TrustLabel = (typeof TRUST_LABELS)[number];

export function isOneOf<T extends string>(set: readonly T[], value: unknown): value is T {
  return typeof value === 'string' && (set as readonly string[]).includes(value);
}

/** Renders a tuple as a SQL list (`'a', 'b'`) for a CHECK or an IN filter. Values are our own constants. */
export function sqlCheckList(set: readonly string[]): string {
  return set.map((s) => `'${s.replace(/'/g, "''")}'`).join(', ');
}

/** Envelope `sender.service` (§2): the process kinds that may produce messages. */
export const SENDER_SERVICES = ['intake', 'turn-worker', 'gate', 'execution-coordinator', 'reconciler', 'operator'] as const;
export type SenderService = (typeof SENDER_SERVICES)[number];

/** `task.cancel` mode (§7): hard refuses new effects at dispatch now; soft parks at the next checkpoint. */
export const CANCEL_MODES = ['hard', 'soft'] as const;
export type CancelMode = (typeof CANCEL_MODES)[number];

/** The stop in force on a case after `requested` is asked on top of `current`: a stop never weakens. */
export function stopAfter(current: CancelMode | null, requested: CancelMode): CancelMode {
  return current === 'hard' ? 'hard' : requested;
}

/** `task.runnable` reason: why a task may have work to do. */
export const RUNNABLE_REASONS = ['opened', 'child_finished', 'answered', 'decided', 'outcome', 'woken', 'retry'] as const;
export type RunnableReason = (typeof RUNNABLE_REASONS)[number];

/** The TASK_STATES a task never leaves; `task.finished` carries one of them. */
export const TERMINAL_TASK_STATES = ['done', 'failed', 'cancelled'] as const satisfies readonly TaskState[];
