/**
 * Crash injection for fault tests: `EVERDICT_CRASHPOINT=after_intent:3` makes the process SIGKILL
 * itself the 3rd time it reaches `after_intent` (several points may be listed, comma separated).
 * Unset, every `reach` is a no-op. A real SIGKILL, not an exception: nothing runs after it — no
 * finally block, no drain, no ack — exactly like a machine dying at that instant.
 *
 * The points of one durable turn (their meaning is the recovery contract, see turn.ts):
 *   after_intent        the turn's request paper + ordinal-0 intent are durable (its own commit,
 *                       or written with the previous turn's checkpoint); the model not yet called
 *   after_model         the model answered; its response exists only in memory
 *   after_response      response (+ the first batch of tool intents) committed; no tool has run
 *   after_tool_results  tools ran; their outcomes are in memory, the turn's commit has not begun
 *   after_commit        a turn's final commit (or a claim's unit of work) committed; before the
 *                       ack of the delivery / the next step of the activation
 */
import { appendFileSync } from 'node:fs';
import { EverdictError } from '@everdict/contracts';

export const CRASH_POINTS = ['after_intent', 'after_model', 'after_response', 'after_tool_results', 'after_commit'] as const;
export type CrashPoint = (typeof CRASH_POINTS)[number];

export interface CrashPoints {
  /** Counts an arrival at `point`; kills the process when the configured count is reached. */
  reach(point: CrashPoint, detail?: Readonly<Record<string, unknown>>): void;
}

/** Parses `point:n[,point:n…]`; the error names the bad entry. */
export function parseCrashSpec(spec: string): Map<CrashPoint, number> {
  const out = new Map<CrashPoint, number>();
  for (const entry of spec.split(',').map((s) => s.trim()).filter(Boolean)) {
    const [point, countText = '1'] = entry.split(':');
    const count = Number(countText);
    if (!(CRASH_POINTS as readonly string[]).includes(point ?? '') || !Number.isSafeInteger(count) || count < 1) {
      throw new EverdictError('config_invalid', `EVERDICT_CRASHPOINT entry ${JSON.stringify(entry)} must be <point>:<n> with point one of ${CRASH_POINTS.join('|')} and n >= 1`, {
        details: { field: 'EVERDICT_CRASHPOINT' },
      });
    }
    out.set(point as CrashPoint, count);
  }
  return out;
}

export const noCrashPoints: CrashPoints = { reach: () => {} };

/**
 * From the environment. `EVERDICT_CRASH_LOG` (optional) gets one JSON line per kill, written
 * synchronously before the signal so a test can tell which point fired where.
 */
export function crashPointsFromEnv(env: Readonly<Record<string, string | undefined>> = process.env, kill: () => void = () => process.kill(process.pid, 'SIGKILL')): CrashPoints {
  const spec = env.EVERDICT_CRASHPOINT?.trim();
  if (!spec) return noCrashPoints;
  const targets = parseCrashSpec(spec);
  const seen = new Map<CrashPoint, number>();
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
