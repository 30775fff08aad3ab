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
import { crash } from '@everdict/service-kit';

export const COORDINATOR_CRASH_POINTS = ['before_execute', 'after_execute', 'after_outcome'] as const;
export type CoordinatorCrashPoint = (typeof COORDINATOR_CRASH_POINTS)[number];

export type CrashPoints = crash.CrashPoints<CoordinatorCrashPoint>;

export const noCrashPoints: CrashPoints = crash.noCrashPoints;
