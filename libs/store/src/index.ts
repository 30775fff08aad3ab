export * from './db.js';
export * from './errors.js';
export * from './metrics.js';
export * from './pg.js';
export * from './migrate.js';
export * from './ledgerHash.js';
export * from './ledgerVerify.js';
export * from './unitOfWork.js';
export * from './store.js';
export * from './inboxBatch.js';
export type { LedgerRow } from './sql/ledger.js';
export { OUTBOX_CHANNEL, outboxNotifyPayload } from './sql/outbox.js';
export * from './pglite.js';
// Durable turns: the call journal and checkpoints, the task family, the agent graph, the case stop.
export * from './journal.js';
// Content-addressed history: manifests and their blocks (migration 0018).
export * from './history.js';
export * from './tasks.js';
export * from './taskGraph.js';
export * from './cases.js';
// The case lifecycle: the state derived from committed records, written with its transition.
export * from './caseState.js';
// Effects under authority: gates, decisions, grants, impact claims, dispatches, effect calls.
export * from './effects.js';
export * from './operatorOutcome.js';
export * from './proposals.js';
// Consent gates for egress reads (K3).
export * from './consents.js';
// Persisted-assignment reads a receiver checks a message against (§4).
export * from './assignments.js';
export * from './groupCommit.js';
// Costs and budgets: measured model usage per call, delivery minutes per task.
export * from './costs.js';
// Intake: case views, question answers, mailbox cursors, fleet counts.
export * from './intake.js';
// The fleet-wide stop (§7).
export * from './fleetStop.js';
// Durable deadlines of gates and questions and their escalation (issue 13 item 6).
export * from './deadlines.js';
// Plan revisions and their confirmations, for the case view (issue 13 item 9).
export * from './planView.js';
// A case's session: its live execution and the one principal that operates it (issue 13 item 2).
export * from './sessions.js';
// Console sign-in: browser sessions exchanged for a bearer token (issue 14 item 1).
export * from './webSessions.js';
// Console reads: filtered case list, papers, gate roles, exceptions (issue 14 item 1).
export * from './console.js';
// Per-case caps at the claim: worker slots (issue 13 item 5).
export type { ClaimCaps, CapacityDetail } from './caps.js';
export { admitExternalCall, admitHold, withHold } from './caps.js';
export type { Hold, HoldCap, HoldQueue, HoldRequest } from './caps.js';
// Retention: bounded pruning passes (issue 15 item 3).
export { RETENTION_KINDS, retentionPass } from './retention.js';
export type { RetentionKind, RetentionPolicy } from './retention.js';
