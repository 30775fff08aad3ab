/**
 * Crash injection for fault tests, shared by every service that declares crash points:
 * `EVERDICT_CRASHPOINT=point:n[,point:n…]` makes the process SIGKILL itself the n-th time it
 * reaches `point`. Unset, every `reach` is a no-op. A real SIGKILL, not an exception: nothing
 * runs after it — no finally block, no drain, no ack — exactly like a machine dying at that
 * instant. `EVERDICT_CRASH_LOG` (optional) gets one JSON line per kill, written synchronously
 * before the signal so a test can tell which point fired where. Each service names its points
 * and documents what is durable at each.
 */
import { appendFileSync } from 'node:fs';
import { EverdictError } from '@everdict/contracts';

export interface CrashPoints<P extends string = string> {
  /** Counts an arrival at `point`; kills the process when the configured count is reached. */
  reach(point: P, detail?: Readonly<Record<string, unknown>>): void;
}

export const noCrashPoints: CrashPoints<string> = { reach: () => {} };

/** Parses `point:n[,point:n…]` against the service's points; the error names the bad entry. */
export function parseCrashSpec<P extends string>(points: readonly P[], spec: string): Map<P, number> {
  const out = new Map<P, number>();
  for (const entry of spec.split(',').map((s) => s.trim()).filter(Boolean)) {
    const [point, countText = '1'] = entry.split(':');
    const count = Number(countText);
    if (!(points as readonly string[]).includes(point ?? '') || !Number.isSafeInteger(count) || count < 1) {
      throw new EverdictError('config_invalid', `EVERDICT_CRASHPOINT entry ${JSON.stringify(entry)} must be <point>:<n> with point one of ${points.join('|')} and n >= 1`, {
        details: { field: 'EVERDICT_CRASHPOINT' },
      });
    }
    out.set(point as P, count);
  }
  return out;
}

export function crashPointsFromEnv<P extends string>(
  points: readonly P[],
  env: Readonly<Record<string, string | undefined>> = process.env,
  kill: () => void = () => process.kill(process.pid, 'SIGKILL'),
): CrashPoints<P> {
  const spec = env.EVERDICT_CRASHPOINT?.trim();
  if (!spec) return noCrashPoints;
  const targets = parseCrashSpec(points, spec);
  const seen = new Map<P, number>();
  const log = env.EVERDICT_CRASH_LOG;
  return {
    reach(point, detail) {
      const target = targets.get(point);
      if (target === undefined) return;
      const n = (seen.get(point) ?? 0) + 1;
      seen.set(point, n);
      if (n !== target) return;
      if (log) appendFileSync(log, `${JSON.stringify({ point, pid: process.pid, at: Date.now(), ...detail })}\n`);
      kill();
    },
  };
}
