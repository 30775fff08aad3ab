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
 *   after_read_batch    a later batch's intents committed together with the outcomes of every
 *                       batch before it (only a turn whose calls form two or more batches);
 *                       the new batch has not run
 *   after_tool_results  tools ran; their outcomes are in memory, the turn's commit has not begun
 *   after_commit        a turn's final commit (or a claim's unit of work) committed; before the
 *                       ack of the delivery / the next step of the activation
 */
import { crash } from '@everdict/service-kit';

export const CRASH_POINTS = ['after_intent', 'after_model', 'after_response', 'after_read_batch', 'after_tool_results', 'after_commit'] as const;
export type CrashPoint = (typeof CRASH_POINTS)[number];

export type CrashPoints = crash.CrashPoints<CrashPoint>;

export const noCrashPoints: CrashPoints = crash.noCrashPoints;
