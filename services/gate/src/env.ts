/**
 * The gate's environment variables, validated by `everdict start` together with every other
 * variable of the node (one ConfigError lists them all). Keys match `GateOptions`.
 */
import { envVar, integerParser } from '@everdict/service-kit';
import type { EnvSpec } from '@everdict/service-kit';
import { DEFAULT_GATE_TTL_MS, DEFAULT_GRANT_TTL_MS } from './service.js';

export const GATE_ENV = {
  /** EVERDICT_GRANT_TTL_MS: lifetime of a grant from its issue (default 15 minutes, at most 7 days). */
  grantTtlMs: envVar('EVERDICT_GRANT_TTL_MS', integerParser(1, 7 * 24 * 3_600_000), { default: DEFAULT_GRANT_TTL_MS }),
  /** EVERDICT_GATE_TTL_MS: lifetime of an undecided gate whose request names no expiry (default 24 hours). */
  gateTtlMs: envVar('EVERDICT_GATE_TTL_MS', integerParser(1, 365 * 24 * 3_600_000), { default: DEFAULT_GATE_TTL_MS }),
} satisfies EnvSpec;
