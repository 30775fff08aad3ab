/**
 * The turn-worker's environment variables, validated by `everdict start` together with every
 * other variable of the node. Its tunables live in the fleet config's `runtime` section
 * (settings.ts); these are per-process names and files.
 */
import { envVar, parseString } from '@everdict/service-kit';
import type { EnvSpec } from '@everdict/service-kit';

export const TURN_WORKER_ENV = {
  /** EVERDICT_WORKER_NAME: lease owner prefix (default the host name; pid and a random suffix follow). */
  workerName: envVar('EVERDICT_WORKER_NAME', parseString),
  /** EVERDICT_MODEL_LOG: file every real model call is appended to as a JSON line (default none). */
  modelLog: envVar('EVERDICT_MODEL_LOG', parseString),
  /** EVERDICT_BENCH_SAMPLES: file the per-turn overhead samples are written to at exit (benchmark; default none). */
  benchSamples: envVar('EVERDICT_BENCH_SAMPLES', parseString),
} satisfies EnvSpec;
