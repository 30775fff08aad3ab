/**
 * Turn-worker metrics (DESIGN §7: `everdict_` prefix, base units, bounded labels only). Turn
 * overhead is the turn's wall time minus the time spent inside the model call and tool
 * handlers: what the runtime itself costs per turn (journal, checkpoint, commits).
 *
 * Model calls are labelled by route (a key of the fleet config's `routes`, so the set is as
 * bounded as the config) and by outcome class (`ok`, a ModelError kind, `cancelled` or `error`):
 * never by model text, task or case.
 */
import { isModelError } from '@everdict/llm';
import type { ModelClient, ModelErrorKind, ModelUsage } from '@everdict/llm';
import { Counter, Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';

const BUCKETS = [0.0005, 0.001, 0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.035, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
/** Provider round trips: from a scripted model's microseconds to a long generation's minutes. */
const MODEL_BUCKETS = [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120];

/** Outcome class of one model call: `ok`, one of the four ModelError kinds, `cancelled`, or `error` (anything else). */
export type ModelCallOutcome = 'ok' | ModelErrorKind | 'cancelled' | 'error';

/** Classifies what `ModelClient.complete` threw; `signal` is the caller's, aborted means cancelled. */
export function modelCallOutcome(err: unknown, signal?: AbortSignal): ModelCallOutcome {
  if (isModelError(err)) return err.kind;
  if (signal?.aborted) return 'cancelled';
  return 'error';
}

export interface TurnMetrics {
  turn(outcome: string, wallSeconds: number, overheadSeconds: number, commits: number): void;
  activation(delta: 1 | -1): void;
  restoreFailure(reason: string): void;
  /** An activation restored from a checkpoint: the state this worker held, or one read back from the store. */
  restored(from: 'held' | 'store'): void;
  swept(kind: 'expired_lease' | 'woken', n: number): void;
  /** One model call on `route`: its duration, outcome class and (when the provider said) tokens. */
  modelCall(route: string, outcome: ModelCallOutcome, seconds: number, usage: ModelUsage | null): void;
  /** Registers the group committer's counters (statements written, task writes carried, case-state expectations). */
  committer(c: { statements: number; writes: number; expectations: { met: number; unmet: number } }): void;
  /** Raw overhead samples for the benchmark (kept only when enabled). */
  readonly samples: number[] | null;
}

/** `inner` with every call counted on `metrics` by route and outcome class; the call itself is unchanged. */
export function meteredModelClient(inner: ModelClient, metrics: Pick<TurnMetrics, 'modelCall'>): ModelClient {
  return {
    route: inner.route,
    async complete(req, opts) {
      const started = performance.now();
      try {
        const reply = await inner.complete(req, opts);
        metrics.modelCall(inner.route.name, 'ok', (performance.now() - started) / 1000, reply.usage);
        return reply;
      } catch (err) {
        metrics.modelCall(inner.route.name, modelCallOutcome(err, opts?.signal), (performance.now() - started) / 1000, null);
        throw err;
      }
    },
  };
}

export function turnMetrics(registry: Registry, opts: { keepSamples?: boolean } = {}): TurnMetrics {
  const registers = [registry];
  const turns = new Counter({ name: 'everdict_turns_total', help: 'Durable turns committed, by outcome (continued, completed, parked, failed, released, cancelled).', labelNames: ['outcome'], registers });
  const commits = new Counter({ name: 'everdict_turn_commits_total', help: 'Units of work committed by turns (intent, response, checkpoint), excluding claims and sweeps.', registers });
  const wall = new Histogram({ name: 'everdict_turn_duration_seconds', help: 'Wall time of a durable turn, from restore to its checkpoint commit.', buckets: BUCKETS, registers });
  const overhead = new Histogram({ name: 'everdict_turn_overhead_seconds', help: 'Runtime overhead of a turn: wall time minus model and tool time.', buckets: BUCKETS, registers });
  const active = new Gauge({ name: 'everdict_active_tasks', help: 'Tasks this turn-worker holds a lease on and runs right now.', registers });
  const restore = new Counter({ name: 'everdict_restore_failures_total', help: 'Checkpoints or journal papers that could not be verified (the task parked).', labelNames: ['reason'], registers });
  const restores = new Counter({ name: 'everdict_task_restores_total', help: 'Activations that continued a task from its checkpoint, by where the state came from: held (this worker released the task at it and still holds it) or store (read back and verified).', labelNames: ['from'], registers });
  const swept = new Counter({ name: 'everdict_sweeps_total', help: 'Tasks made runnable by the sweeper, by kind (expired_lease, woken).', labelNames: ['kind'], registers });
  const modelDuration = new Histogram({ name: 'everdict_model_call_duration_seconds', help: 'Duration of one model call (one provider request), by route and outcome class.', labelNames: ['route', 'outcome'], buckets: MODEL_BUCKETS, registers });
  const modelErrors = new Counter({ name: 'everdict_model_call_errors_total', help: 'Model calls that failed, by route and error class (retryable, provider_down, invalid_request, context_too_long, cancelled, error).', labelNames: ['route', 'kind'], registers });
  const tokensIn = new Counter({ name: 'everdict_model_input_tokens_total', help: 'Input tokens the provider reported for model calls, by route (calls whose provider did not report usage add nothing).', labelNames: ['route'], registers });
  const tokensOut = new Counter({ name: 'everdict_model_output_tokens_total', help: 'Output tokens the provider reported for model calls, by route (calls whose provider did not report usage add nothing).', labelNames: ['route'], registers });
  const samples: number[] | null = opts.keepSamples ? [] : null;
  return {
    samples,
    turn(outcome, wallSeconds, overheadSeconds, n) {
      turns.inc({ outcome });
      commits.inc(n);
      wall.observe(wallSeconds);
      overhead.observe(overheadSeconds);
      samples?.push(overheadSeconds);
    },
    modelCall(route, outcome, seconds, usage) {
      modelDuration.observe({ route, outcome }, seconds);
      if (outcome !== 'ok') modelErrors.inc({ route, kind: outcome });
      // Unknown usage (null) is not zero: it adds nothing rather than a false 0.
      if (usage?.inputTokens != null) tokensIn.inc({ route }, usage.inputTokens);
      if (usage?.outputTokens != null) tokensOut.inc({ route }, usage.outputTokens);
    },
    activation: (d) => active.inc(d),
    restoreFailure: (reason) => restore.inc({ reason }),
    restored: (from) => restores.inc({ from }),
    swept: (kind, n) => swept.inc({ kind }, n),
    committer(c) {
      new Gauge({ name: 'everdict_journal_statements', help: 'Group-commit statements this process has written (each carries the writes of one or more tasks).', registers, collect() { this.set(c.statements); } });
      new Gauge({ name: 'everdict_journal_writes', help: 'Task journal writes carried by group-commit statements.', registers, collect() { this.set(c.writes); } });
      new Gauge({
        name: 'everdict_case_state_expectations',
        help: 'Batches of finishes the group committer sent with the case states it expected, by outcome: met (one round trip) or unmet (rolled back and derived first).',
        labelNames: ['outcome'],
        registers,
        collect() {
          this.set({ outcome: 'met' }, c.expectations.met);
          this.set({ outcome: 'unmet' }, c.expectations.unmet);
        },
      });
    },
  };
}
