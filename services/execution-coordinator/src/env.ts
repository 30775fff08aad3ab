/**
 * The execution-coordinator's environment variables, validated by `everdict start` together
 * with every other variable of the node. Keys match `CoordinatorOptions`.
 */
import { envVar, integerParser } from '@everdict/service-kit';
import type { EnvSpec } from '@everdict/service-kit';

export const COORDINATOR_ENV = {
  /** EVERDICT_DISPATCH_LEASE_MS: claim lease of a dispatch (default 30 000); a dead coordinator's executions reach reconciliation after it. */
  leaseMs: envVar('EVERDICT_DISPATCH_LEASE_MS', integerParser(200, 3_600_000), { default: 30_000 }),
  /** EVERDICT_DISPATCH_POLL_MS: poll period when no notification arrives (default 1000). */
  pollMs: envVar('EVERDICT_DISPATCH_POLL_MS', integerParser(10, 60_000), { default: 1_000 }),
} satisfies EnvSpec;
