/**
 * @everdict/agent-runtime — the kernel (K1–K8): turns over a ToolRegistry with the authority
 * gates enforced on every call. Depends on @everdict/contracts and @everdict/llm only; the
 * durable turn-worker reaches it through the ports in ports.ts.
 *
 * Entry points: `kernelRegistry` (merge base tools with intrinsic cognition), `runTurn` (one
 * durable turn from restored state), `runToSettlement` / `resumeRun` (drivers),
 * `inProcessSubAgents` (children in-process).
 */
export * from './ports.js';
export * from './state.js';
export * from './policy.js';
export * from './events.js';
export * from './registry.js';
export * from './action-document.js';
export * from './call-record.js';
export * from './children.js';
export { type KernelDeps } from './kernel-ports.js';
export { runTurn, modelRequestFor, type TurnResult } from './turn.js';
export * from './run.js';
export * from './memory.js';
