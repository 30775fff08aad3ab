/**
 * Unknown type or version (seed 004 §4, DESIGN §3): a message whose envelope is valid but whose
 * type@version has no payload schema is refused without guessing at its payload; besides the
 * dead-letter, the task it is for — `payload.taskId`, salvaged as a well-formed id and looked up
 * in the envelope's case, nothing else of the payload is read — parks `capability_gap`, and its
 * parent, if it has one, gets exactly one DeadEnd (`task.dead_end`).
 *
 * Exactly once: the park, the ledger record and the DeadEnd commit with the refused message's
 * inbox row (disposition 'refused'), so a redelivery or a re-publish finds the row and does
 * nothing. The parent applies a DeadEnd only from its child of record, parked `capability_gap`.
 */
import { wakes, isOneOf, TERMINAL_TASK_STATES } from '@everdict/contracts';
import type { AnyEnvelope } from '@everdict/contracts';
import type { MessageHandler, Refusal } from '@everdict/bus';
import { addNote, loadTask, lockTask, parkCapabilityGap } from '@everdict/store';
import type { Store } from '@everdict/store';
import type { Logger } from 'pino';
import { send } from './envelopes.js';
import type { HandlerEnv } from './handlers.js';
import { childOf, refuse } from './refusals.js';
import { wake } from './wake.js';

type Of<T extends AnyEnvelope['type']> = Extract<AnyEnvelope, { type: T }>;

const UNDERSTOOD_NOT = new Set(['unknown_type', 'unknown_version']);

/**
 * The consumer's refusal hook: parks the target and sends the DeadEnd for an unknown type or
 * version, in its own unit of work; any other refusal is not its business.
 */
export function deadEndOnRefusal(store: Store, service: string, logger: Pick<Logger, 'warn'>): (r: Refusal) => Promise<void> {
  return async (r) => {
    if (!UNDERSTOOD_NOT.has(r.reason)) return;
    const { messageId, caseId, targetTaskId, payloadHash } = r;
    if (messageId === undefined || caseId === undefined || targetTaskId === undefined || payloadHash === undefined) return; // nothing names a task
    // A delivery recorded already was parked (or not) the first time: the outcome says so.
    await store.unitOfWorkOnInbox({ consumer: service, messageId, payloadHash, type: r.type ?? 'unknown', disposition: 'refused' }, async (uow) => {
      const detail = { kind: 'unknown_message', reason: r.reason, messageId, type: r.type ?? null, version: r.version ?? null };
      const parked = await parkCapabilityGap(uow, targetTaskId, caseId, detail);
      if (!parked) return;
      await uow.appendLedger(caseId, { kind: 'task_dead_end', body: { taskId: parked.id, parentTaskId: parked.parent_id, ...detail } });
      logger.warn({ taskId: parked.id, messageId, reason: r.reason, type: r.type ?? null }, 'task parked capability_gap on a message it cannot understand');
      if (parked.parent_id === null) return;
      await send(
        uow,
        'task.dead_end',
        {
          taskId: parked.id,
          parentTaskId: parked.parent_id,
          reason: r.reason as 'unknown_type' | 'unknown_version',
          messageId,
          ...(r.type !== undefined ? { messageType: r.type } : { messageType: 'unknown.type' }),
          ...(r.version !== undefined && r.version >= 1 ? { messageVersion: r.version } : {}),
        },
        { caseId, from: parked },
      );
    });
  };
}

/** A parent learns that its child of record parked `capability_gap`: a note, and a parent waiting on its children wakes. */
export function deadEndHandler(env: HandlerEnv): MessageHandler<Of<'task.dead_end'>> {
  return async (e, uow) => {
    const p = e.payload;
    const child = await loadTask(uow, p.taskId);
    const bad = childOf(e, child, p.parentTaskId);
    if (bad !== null) return refuse(env, e, bad);
    if (child!.state !== 'parked' || child!.park_reason !== 'capability_gap') return refuse(env, e, 'the task is not parked capability_gap');
    const parent = await lockTask(uow, p.parentTaskId);
    if (!parent || isOneOf(TERMINAL_TASK_STATES, parent.state)) return 'ignored';
    const seq = await addNote(uow, parent.id, 'dead_end', { childTaskId: child!.id, reason: p.reason, messageId: p.messageId, messageType: p.messageType, messageVersion: p.messageVersion ?? null }, e.id);
    if (seq === null) return 'ignored';
    await uow.appendLedger(parent.case_id, { kind: 'dead_end_reported', body: { taskId: child!.id, to: parent.id, reason: p.reason, messageId: p.messageId } });
    // A parent parked on its children would otherwise wait for a report this child never sends.
    if (parent.state === 'parked' && wakes(parent.park_reason, 'child_question')) await wake(uow, parent.id, 'child_question');
    return 'applied';
  };
}
