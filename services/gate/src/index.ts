/**
 * @everdict/gate — derives every decision an effect packet needs from the fleet's gate policies,
 * records each role holder's verdict bound to the packet digest, issues the grant, expires and
 * revokes (DESIGN §2, §6, §7; seed 004 §5). `everdict start` composes it (cli/src/node/services.ts).
 */
export * from './policy.js';
export * from './requests.js';
export * from './decide.js';
export * from './api.js';
export * from './outcomes.js';
export * from './service.js';
export * from './env.js';
