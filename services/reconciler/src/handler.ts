/**
 * `effect.outcome` at the reconciler: an unknown outcome is reconciled now rather than at the
 * next timer tick. Everything else about the message is the turn-worker's business.
 */
import type { Envelope } from '@everdict/contracts';
import type { MessageHandler } from '@everdict/bus';
import { RECONCILE_CHANNEL, loadDispatchOfCall, moveDispatchTo, notifyAtCommit } from '@everdict/store';

export function effectOutcomeHandler(): MessageHandler<Envelope<'effect.outcome'>> {
  return async (e, uow) => {
    if (e.payload.outcome !== 'unknown') return 'ignored';
    const d = await loadDispatchOfCall(uow, e.payload.callId);
    if (!d || d.state !== 'reconciling' || d.case_id !== e.caseId) return 'ignored';
    await moveDispatchTo(uow, { grantId: d.grant_id, from: ['reconciling'], to: 'reconciling', keepClaim: true, delayMs: 0 });
    await notifyAtCommit(uow, RECONCILE_CHANNEL);
    return 'applied';
  };
}
