/**
 * `effect.outcome` at the reconciler: an unknown outcome is reconciled now rather than at the
 * next timer tick. Everything else about the message is the turn-worker's business.
 *
 * Only an outcome the coordinator or reconciler reports for a journalled dispatch of that call
 * and grant (same check as the turn-worker's, §4) moves a dispatch; anything else is refused,
 * dead-lettered and counted, and reconciles nothing early.
 */
import { effectOutcomeRefusal } from '@everdict/contracts';
import type { Envelope } from '@everdict/contracts';
import { refusedBecause } from '@everdict/bus';
import type { MessageHandler } from '@everdict/bus';
import { RECONCILE_CHANNEL, journalledDispatch, loadDispatchOfCall, moveDispatchTo, notifyAtCommit } from '@everdict/store';

export function effectOutcomeHandler(): MessageHandler<Envelope<'effect.outcome'>> {
  return async (e, uow) => {
    const p = e.payload;
    if (p.outcome !== 'unknown') return 'ignored';
    const journalled = await journalledDispatch(uow, { caseId: e.caseId, taskId: p.taskId, callId: p.callId, grantId: p.grantId });
    const refusal = effectOutcomeRefusal(e.sender.service, journalled);
    if (refusal !== null) return refusedBecause(refusal);
    const d = await loadDispatchOfCall(uow, p.callId);
    if (!d || d.state !== 'reconciling' || d.case_id !== e.caseId) return 'ignored';
    await moveDispatchTo(uow, { grantId: d.grant_id, from: ['reconciling'], to: 'reconciling', keepClaim: true, delayMs: 0 });
    await notifyAtCommit(uow, RECONCILE_CHANNEL);
    return 'applied';
  };
}
