export * from './db.js';
export * from './errors.js';
export * from './metrics.js';
export * from './pg.js';
export * from './migrate.js';
export * from './ledgerHash.js';
export * from './unitOfWork.js';
export * from './store.js';
export * from './inboxBatch.js';
export type { TaskRow } from './sql/tasks.js';
export type { OutboxRow } from './sql/outbox.js';
export type { LedgerRow } from './sql/ledger.js';
export { OUTBOX_CHANNEL } from './sql/outbox.js';
export * from './pglite.js';
// Durable turns (issue 4): the call journal, checkpoints and the agent graph's statements.
export * from './journal.js';
export * from './taskGraph.js';
// Effects under authority (issue 5): gates, decisions, grants, impact claims, dispatches, effect calls.
export * from './effects.js';
export * from './proposals.js';
export * from './groupCommit.js';
// Intake (issue 6): case views, question answers, mailbox cursors, fleet counts.
export * from './intake.js';
