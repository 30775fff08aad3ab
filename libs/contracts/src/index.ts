/**
 * @everdict/contracts — pure types and decisions, no I/O.
 *
 * Glossary (the project's vocabulary, from the seeds):
 * - case: a unit of customer work (a ticket, a configuration job, a fix-and-deploy); it owns
 *   papers, tasks, gates and a hash-chained ledger. Cases never expire.
 * - task: a unit of work inside a case with a parent pointer; the agent graph IS the task tree.
 * - turn: one recorded model request/response and the actions that follow it; a durable state
 *   transition, not a distributed transaction.
 * - envelope: the runtime-stamped wrapper of every message (id, sender, lineage, trust, hash);
 *   the model proposes only the business payload.
 * - lease: a worker's time-limited claim on a task, measured on the DATABASE clock.
 * - fence epoch: incremented on every claim; every later write names it, so a stale worker's
 *   writes are refused (`StaleFence`).
 * - paper: content-addressed bytes with a schema id (requests, responses, checkpoints, summaries).
 * - park: a task waiting for a named reason class; the class decides what wakes it (PARK_CLASSES).
 * - gate: the set of decisions an effect packet needs from role holders.
 * - grant: authority bound to one packet digest, reserved by exactly one journal call.
 * - packet: the exact, digest-bound description of one proposed effect.
 * - impact key: a write-scope key (environment, system, account…) claimed in sorted order.
 * - WhatLanded: a connector's answer to "did the effect happen?" — applied, not_applied,
 *   partly_applied or unknown, plus how that was established.
 */
export * from './states.js';
export * from './park.js';
export * from './canonical.js';
export * from './ids.js';
export * from './errors.js';
export * from './jitter.js';
export * from './kernel.js';
export * from './clock.js';
import type { FleetHttpOperation, FleetPostgresOperation } from './generated/index.js';
export * from './generated/index.js';
/** One operation of either connector kind: the fields every process reads (access, params, effect class, impact keys). */
export type FleetOperation = FleetHttpOperation | FleetPostgresOperation;
export * from './schema-registry.js';
export * from './messages.js';
export * from './envelope.js';
export * from './producers.js';
export * from './packet.js';
export * from './assignments.js';
