/**
 * Crash injection for fault tests: `EVERDICT_CRASHPOINT=before_execute:1` makes the process
 * SIGKILL itself the 1st time it reaches `before_execute` (several points may be listed, comma
 * separated). Unset, every `reach` is a no-op. A real SIGKILL: no finally block, no drain, no
 * ack and no claim release run after it — exactly a machine dying at that instant.
 *
 *   before_execute  the intent is committed (grant reserved, impact keys claimed); the connector
 *                   has not been called
 *   after_execute   the connector answered; the answer exists only in memory
 *   after_outcome   the outcome is committed; the post-check and settlement have not run
 */
import { appendFileSync } from 'node:fs';
import { EverdictError } from '@everdict/contracts';

export const COORDINATOR_CRASH_POINTS = ['before_execute', 'after_execute', 'after_outcome'] as const;
export type CoordinatorCrashPoint = (typeof COORDINATOR_CRASH_POINTS)[number];

export interface CrashPoints {
  reach(point: CoordinatorCrashPoint, detail?: Readonly<Record<string, unknown>>): void;
}

export const noCrashPoints: CrashPoints = { reach: () => {} };

/** Parses `point:n[,point:n…]`; the error names the bad entry. */
export function parseCrashSpec(spec: string): Map<CoordinatorCrashPoint, number> {
  const out = new Map<CoordinatorCrashPoint, number>();
  for (const entry of spec.split(',').map((s) => s.trim()).filter(Boolean)) {
    const [point, countText = '1'] = entry.split(':');
    const count = Number(countText);
    if (!(COORDINATOR_CRASH_POINTS as readonly string[]).includes(point ?? '') || !Number.isSafeInteger(count) || count < 1) {
      throw new EverdictError('config_invalid', `EVERDICT_CRASHPOINT entry ${JSON.stringify(entry)} must be <point>:<n> with point one of ${COORDINATOR_CRASH_POINTS.join('|')} and n >= 1`, {
        details: { field: 'EVERDICT_CRASHPOINT' },
      });
    }
    out.set(point as CoordinatorCrashPoint, count);
  }
  return out;
}

/** From the environment; `EVERDICT_CRASH_LOG` gets one JSON line per kill, written before the signal. */
export function crashPointsFromEnv(env: Readonly<Record<string, string | undefined>> = process.env, kill: () => void = () => process.kill(process.pid, 'SIGKILL')): CrashPoints {
  const spec = env.EVERDICT_CRASHPOINT?.trim();
  if (!spec) return noCrashPoints;
  const targets = parseCrashSpec(spec);
  const seen = new Map<CoordinatorCrashPoint, number>();
  const log = env.EVERDICT_CRASH_LOG;
  return {
    reach(point, detail) {
      const target = targets.get(point);
      if (target === undefined) return;
      const n = (seen.get(point) ?? 0) + 1;
      seen.set(point, n);
      if (n !== target) return;
      if (log) appendFileSync(log, `${JSON.stringify({ point, pid: process.pid, ...detail })}\n`);
      kill();
    },
  };
}
