/**
 * The decisions the agent kernel consumes (K1–K8) — they live here, not in the kernel, so that
 * one invariant has one owner: the scope gate, intrinsic marking, consent, execution mode,
 * budget exhaustion, refusal wording, and the action document a model response must become.
 */
export * from './tools.js';
export * from './scope.js';
export * from './connectorRead.js';
export * from './mode.js';
export * from './refusals.js';
export * from './budget.js';
export type { ActionDocument, ToolCallAction } from './generated/action-document.js';
