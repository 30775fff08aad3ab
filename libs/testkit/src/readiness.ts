/**
 * How long a test waits for a process it spawned to become ready. A fixed budget that suffices
 * on an idle workstation is too short on a small, busy CI machine (two cores shared with other
 * test workers), so the budget grows with the shortfall of cores and with the run queue.
 */
import { availableParallelism, loadavg } from 'node:os';

/** Cores at which the base budget applies unscaled. */
const REFERENCE_CORES = 4;
/** The budget never exceeds this many times its base, so a hung process still fails the test. */
const MAX_FACTOR = 4;
/** Nor this, which stays inside the integration tests' and hooks' timeouts (vitest.config.ts). */
const MAX_BUDGET_MS = 150_000;

/**
 * The readiness budget in ms: `baseMs` (default 30 s) × max(1, 4 / cores) × max(1, 1-minute load
 * per core), at most 4 × `baseMs` and 150 s. TEST_READY_BUDGET_MS, when set to a positive
 * number, is the budget instead.
 */
export function readinessBudgetMs(baseMs = 30_000): number {
  const override = Number(process.env.TEST_READY_BUDGET_MS);
  if (process.env.TEST_READY_BUDGET_MS && Number.isFinite(override) && override > 0) return override;
  const cores = Math.max(1, availableParallelism());
  const loadPerCore = (loadavg()[0] ?? 0) / cores;
  const factor = Math.min(MAX_FACTOR, Math.max(1, REFERENCE_CORES / cores) * Math.max(1, loadPerCore));
  return Math.round(Math.min(baseMs * factor, MAX_BUDGET_MS));
}
