/**
 * The states this worker holds of tasks it released at a checkpoint (an activation that ran its
 * `turnsPerActivation` turns gives the task back with a task.runnable). The next claim of such
 * a task — most often by this same worker, moments later — would read the checkpoint back:
 * reassemble the whole conversation from its blocks, hash it, parse and validate it, and chain
 * every message again, all in proportion to the history. Holding the state it wrote, the worker
 * continues from it instead, when the latest checkpoint still records exactly that state (its
 * hash; loadRestorePoint compares it and then sends no bytes).
 *
 * Invariants:
 * - an entry is the state a checkpoint of this process committed (run and host, immutable
 *   values), with that checkpoint's state hash: equal hashes mean the same document, so
 *   continuing from it is continuing from the checkpoint;
 * - an entry is taken once (the next claim's restore), whatever it finds; a claim by another
 *   worker leaves it to age out: at most `limit` entries are kept, the oldest dropped first;
 * - the stored copy is still verified whenever anyone reads it back (another worker, a restart,
 *   an audit); only this worker's own next activation skips reading it.
 */
import type { RunState } from '@everdict/agent-runtime';
import type { HostState } from './statePaper.js';

export interface HeldState {
  /** The checkpoint's state hash (the content hash of its state paper). */
  readonly stateHash: string;
  readonly run: RunState;
  readonly host: HostState;
}

export class HeldStates {
  private readonly states = new Map<string, HeldState>();

  constructor(private readonly limit: () => number) {}

  /** Holds the state `taskId` was released at (replacing any earlier one). */
  keep(taskId: string, state: HeldState): void {
    this.states.delete(taskId);
    this.states.set(taskId, state);
    const limit = Math.max(0, this.limit());
    for (const oldest of this.states.keys()) {
      if (this.states.size <= limit) break;
      this.states.delete(oldest);
    }
  }

  /** The state held for `taskId`, if any; it is no longer held afterwards. */
  take(taskId: string): HeldState | undefined {
    const state = this.states.get(taskId);
    this.states.delete(taskId);
    return state;
  }
}
