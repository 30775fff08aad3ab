/**
 * Outgoing messages. The model proposes only business payloads; the runtime stamps the rest
 * (id, sender, lineage, trust, hash, the active traceparent) from PERSISTED task rows, and the message goes into the
 * outbox of the unit of work that decided it — never published from a transaction.
 */
import { buildEnvelope, encodeEnvelope, systemClock, trustLabelFor } from '@everdict/contracts';
import type { CurrentVersion, MessageType, PayloadOf, RunnableReason } from '@everdict/contracts';
import { traceparentField } from '@everdict/tracing';
import type { FenceToken, OutboxWrite, UnitOfWork } from '@everdict/store';

/** What stamping needs to know about the task a message is sent by (or about). */
export interface TaskIdentity {
  readonly id: string;
  readonly case_id: string;
  readonly parent_id: string | null;
  readonly ancestry: readonly string[];
  readonly profile: string;
  readonly profile_version: string;
}

/** The stamped envelope of `type` as an outbox row (for a write that enqueues it itself). */
export function outboxRow<T extends MessageType>(type: T, payload: PayloadOf<T, CurrentVersion<T>>, opts: { caseId: string; from: TaskIdentity | null }): OutboxWrite {
  const envelope = stamp(type, payload, opts);
  return { messageId: envelope.id, type, routingKey: type, body: encodeEnvelope(envelope), traceparent: envelope.traceparent };
}

function stamp<T extends MessageType>(type: T, payload: PayloadOf<T, CurrentVersion<T>>, opts: { caseId: string; from: TaskIdentity | null }) {
  const from = opts.from;
  return buildEnvelope(
    {
      type,
      version: 1 as CurrentVersion<T>,
      caseId: opts.caseId,
      lineage: { rootCaseId: opts.caseId, parentTaskId: from?.parent_id ?? null, ancestry: from ? [...from.ancestry] : [] },
      sender: { service: 'turn-worker', taskId: from?.id ?? null, profile: from?.profile ?? null, profileVersion: from ? from.profile_version : null },
      // From the content's origin (trustLabelFor), not from the relaying service.
      trust: trustLabelFor(type, payload, from ? 'task' : 'service'),
      payload,
      // The active trace (the turn's span, or the delivery's): the receiver continues it.
      ...traceparentField(),
    },
    systemClock,
  );
}

/**
 * Enqueues `type` in `uow`. `from` is the sending task (its lineage and profile are stamped);
 * null for a message the runtime sends on no task's behalf. With `fence`, a stale worker cannot
 * enqueue (the unit of work fails with StaleFence).
 */
export async function send<T extends MessageType>(
  uow: UnitOfWork,
  type: T,
  payload: PayloadOf<T, CurrentVersion<T>>,
  opts: { caseId: string; from: TaskIdentity | null; fence?: FenceToken },
): Promise<string> {
  const envelope = stamp(type, payload, opts);
  await uow.enqueue({ id: envelope.id, type, caseId: opts.caseId, traceparent: envelope.traceparent }, encodeEnvelope(envelope), opts.fence ? { fence: opts.fence } : {});
  return envelope.id;
}

/** A task.runnable nudge for `task`, sent by `from` (or by the runtime). */
export function sendRunnable(uow: UnitOfWork, task: { id: string; case_id: string }, reason: RunnableReason, from: TaskIdentity | null, fence?: FenceToken): Promise<string> {
  return send(uow, 'task.runnable', { taskId: task.id, reason }, { caseId: task.case_id, from, ...(fence ? { fence } : {}) });
}
