/**
 * Turn-worker metrics (DESIGN §7: `everdict_` prefix, base units, bounded labels only). Turn
 * overhead is the turn's wall time minus the time spent inside the model call and tool
 * handlers: what the runtime itself costs per turn (journal, checkpoint, commits).
 */
import { Counter, Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';

const BUCKETS = [0.0005, 0.001, 0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.035, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

export interface TurnMetrics {
  turn(outcome: string, wallSeconds: number, overheadSeconds: number, commits: number): void;
  activation(delta: 1 | -1): void;
  restoreFailure(reason: string): void;
  swept(kind: 'expired_lease' | 'woken', n: number): void;
  /** Registers the group committer's counters (statements written, task writes carried). */
  committer(c: { statements: number; writes: number }): void;
  /** Raw overhead samples for the benchmark (kept only when enabled). */
  readonly samples: number[] | null;
}

export function turnMetrics(registry: Registry, opts: { keepSamples?: boolean } = {}): TurnMetrics {
  const registers = [registry];
  const turns = new Counter({ name: 'everdict_turns_total', help: 'Durable turns committed, by outcome (continued, completed, parked, failed, released, cancelled).', labelNames: ['outcome'], registers });
  const commits = new Counter({ name: 'everdict_turn_commits_total', help: 'Units of work committed by turns (intent, response, checkpoint), excluding claims and sweeps.', registers });
  const wall = new Histogram({ name: 'everdict_turn_duration_seconds', help: 'Wall time of a durable turn, from restore to its checkpoint commit.', buckets: BUCKETS, registers });
  const overhead = new Histogram({ name: 'everdict_turn_overhead_seconds', help: 'Runtime overhead of a turn: wall time minus model and tool time.', buckets: BUCKETS, registers });
  const active = new Gauge({ name: 'everdict_active_tasks', help: 'Tasks this turn-worker holds a lease on and runs right now.', registers });
  const restore = new Counter({ name: 'everdict_restore_failures_total', help: 'Checkpoints or journal papers that could not be verified (the task parked).', labelNames: ['reason'], registers });
  const swept = new Counter({ name: 'everdict_sweeps_total', help: 'Tasks made runnable by the sweeper, by kind (expired_lease, woken).', labelNames: ['kind'], registers });
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
    activation: (d) => active.inc(d),
    restoreFailure: (reason) => restore.inc({ reason }),
    swept: (kind, n) => swept.inc({ kind }, n),
    committer(c) {
      new Gauge({ name: 'everdict_journal_statements', help: 'Group-commit statements this process has written (each carries the writes of one or more tasks).', registers, collect() { this.set(c.statements); } });
      new Gauge({ name: 'everdict_journal_writes', help: 'Task journal writes carried by group-commit statements.', registers, collect() { this.set(c.writes); } });
    },
  };
}
