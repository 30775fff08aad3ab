/** The ports a run is given, and their resolution with defaults. */
import { newId } from '@everdict/contracts';
import type { HandoffPort, Journal, KernelClock, ModelTransport, PermissionHook, ResultStore, SubAgentPort } from './ports.js';
import { DEFAULT_POLICY, type KernelPolicy } from './policy.js';
import type { ToolRegistry } from './registry.js';

export interface KernelDeps {
  readonly model: ModelTransport;
  readonly journal: Journal;
  /** Build with `kernelRegistry(baseTools)`: the merge marks the intrinsic tools. */
  readonly tools: ToolRegistry;
  readonly results: ResultStore;
  readonly clock: KernelClock;
  /** Absent: calls that need permission are refused (fail closed). */
  readonly permission?: PermissionHook;
  /** Absent: `spawn` answers a tool error. */
  readonly subAgents?: SubAgentPort;
  /** Absent: a halt reports its handoff as `absent`. */
  readonly handoff?: HandoffPort;
  /** Call-id allocation. Default: UUIDv7 (`newId`). */
  readonly newId?: () => string;
  readonly policy?: Partial<KernelPolicy>;
}

export interface KernelPorts extends Omit<KernelDeps, 'newId' | 'policy'> {
  readonly newId: () => string;
  readonly policy: KernelPolicy;
}

export function resolvePorts(deps: KernelDeps): KernelPorts {
  const policy = { ...DEFAULT_POLICY, ...deps.policy };
  if (!(policy.modelAttempts >= 1)) throw new RangeError('policy.modelAttempts must be at least 1');
  return { ...deps, newId: deps.newId ?? newId, policy };
}
