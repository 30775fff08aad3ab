/**
 * @everdict/execution-coordinator — executes approved effects exactly as granted (DESIGN §2, §6;
 * seed 004 §5, §7): reloads authority, preflights, claims impact keys, reserves the grant for
 * one journal call, persists the intent, executes once, persists the outcome before anything
 * else, post-checks, settles. `everdict start` composes it with `startExecutionCoordinator`.
 */
export * from './authority.js';
export * from './crashpoints.js';
export * from './dispatcher.js';
export * from './handler.js';
export * from './service.js';
export * from './env.js';
