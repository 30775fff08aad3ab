/**
 * @everdict/turn-worker — claims tasks and runs durable agent turns (seed 004 §2, §3, §6, §7,
 * §11.3–§11.5): call journal, checkpoints, sub-agents, plans, questions, parking, versions.
 * `everdict start` composes it with `startTurnWorker`; these exports are its parts.
 */
export * from './activation.js';
export * from './authority.js';
export * from './catalog.js';
export * from './compaction.js';
export * from './controlHandlers.js';
export * from './crashpoints.js';
export * from './decisions.js';
export * from './envelopes.js';
export * from './firstIntent.js';
export * from './handlers.js';
export * from './leases.js';
export * from './metrics.js';
export * from './notes.js';
export * from './paperAccess.js';
export * from './questions.js';
export * from './service.js';
export * from './settings.js';
export * from './statePaper.js';
export * from './sweeper.js';
export * from './tools.js';
export * from './turn.js';
export * from './turnBuffer.js';
export * from './turnJournal.js';
export * from './turnWrite.js';
export * from './versions.js';
export * from './worker.js';
export * from './env.js';
