/**
 * The fleet soft stop at a task's checkpoint (seed 004 §7): a running task parks there, exactly
 * as under its own soft cancel (park gate, detail kind soft_cancel), and the resume wakes it
 * through `task.resume`. The hint below is read at most once per `ttlMs` per process, so a turn
 * costs no extra query; it only decides whether to look under the lock — the park itself is
 * written only after `fleetStopInForce` (the stop row held FOR SHARE) says the stop still holds,
 * so a park never commits after the resume that would have woken it.
 */
import { loadFleetStops } from '@everdict/store';
import type { Queryable } from '@everdict/store';
import type { Transition } from './decisions.js';

export class FleetStopHint {
  private value = false;
  private readAt = Number.NEGATIVE_INFINITY;
  private pending: Promise<boolean> | undefined;

  constructor(
    private readonly db: Queryable,
    private readonly ttlMs = 1_000,
  ) {}

  /** Whether a fleet soft stop seemed in force at most `ttlMs` ago (false when it cannot be read). */
  softInForce(): Promise<boolean> {
    if (performance.now() - this.readAt < this.ttlMs) return Promise.resolve(this.value);
    this.pending ??= loadFleetStops(this.db)
      .then((rows) => rows.some((r) => r.kind === 'soft' && r.active))
      .catch(() => false)
      .then((v) => {
        this.value = v;
        this.readAt = performance.now();
        this.pending = undefined;
        return v;
      });
    return this.pending;
  }
}

/** A soft-stop park marked as the fleet's (the ledger and the task view show whose stop it is). */
export function asFleetPark(t: Transition): Transition {
  return t.kind === 'park' && t.detail['kind'] === 'soft_cancel' ? { ...t, detail: { ...t.detail, fleetStop: true } } : t;
}
