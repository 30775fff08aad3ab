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
export { OUTBOX_CHANNEL } from './sql/outbox.js';
export * from './pglite.js';
// Durable turns: the call journal and checkpoints, the task family, the agent graph, the case stop.
export * from './journal.js';
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
// Per-case caps at the claim: worker slots (issue 13 item 5).
export type { ClaimCaps, CapacityDetail } from './caps.js';
export { admitExternalCall } from './caps.js';
