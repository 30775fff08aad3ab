/**
 * How the turn-worker refuses a message (seed 004 §4): logged with its reason (ids only) and
 * handed to the consumer, which records it 'refused', dead-letters and counts it. And the check
 * every child-to-parent message shares: the sender is the persisted child of the parent named.
 */
import { refusedBecause } from '@everdict/bus';
import type { Refused } from '@everdict/bus';
import type { AnyEnvelope } from '@everdict/contracts';
import type { TaskRow } from '@everdict/store';
import type { Logger } from 'pino';

export function refuse(env: { readonly logger: Pick<Logger, 'warn'> }, e: AnyEnvelope, why: string): Refused {
  env.logger.warn({ messageId: e.id, type: e.type, why }, 'message refused by the turn-worker');
  return refusedBecause(why);
}

/** The sender must be the persisted child of the parent the payload names. */
export function childOf(e: AnyEnvelope, child: TaskRow | undefined, parentId: string): string | null {
  if (!child) return 'unknown task';
  if (child.parent_id === null || child.parent_id !== parentId) return 'task is not a child of that parent';
  if (e.sender.taskId !== child.id) return 'sender is not the task';
  if (e.lineage.parentTaskId !== child.parent_id) return 'lineage does not match the task graph';
  if (e.caseId !== child.case_id) return 'case does not match the task';
  return null;
}
