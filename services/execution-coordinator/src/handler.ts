/**
 * `gate.decided` → a dispatch row (the coordinator's durable work list). Runs inside the
 * delivery's unit of work: the inbox row and the queued dispatch commit together, and the
 * NOTIFY that wakes a dispatcher is delivered only at that COMMIT. Nothing external happens
 * here; the dispatcher does the §5 sequence outside any transaction.
 *
 * Only an approval the gate's record bears out (the gate approved, every required decision
 * approved for its digest: gateVerdictRefusal) and naming a grant that exists for exactly this
 * gate, task, case and digest is queued; anything else is refused (dead-lettered, counted) and
 * dispatches nothing. A grant is queued at most once (the dispatch row's key is the grant id): a second
 * approval message for the same grant — a replay, a forgery, a bug — is refused and recorded.
 */
import { gateVerdictRefusal } from '@everdict/contracts';
import type { Envelope } from '@everdict/contracts';
import { refusedBecause } from '@everdict/bus';
import type { MessageHandler } from '@everdict/bus';
import { DISPATCH_CHANNEL, loadGateRecord, loadGrant, notifyAtCommit, queueDispatch } from '@everdict/store';

interface DecidedHandlerLogger {
  warn(obj: object, msg: string): void;
}

export function gateDecidedHandler(logger: DecidedHandlerLogger): MessageHandler<Envelope<'gate.decided'>> {
  return async (e, uow) => {
    const p = e.payload;
    if (p.outcome !== 'approved') return 'ignored';
    const grant = p.grantId === undefined ? undefined : await loadGrant(uow, p.grantId);
    const matches =
      grant !== undefined &&
      e.sender.service === 'gate' &&
      grant.gate_id === p.gateId &&
      grant.case_id === e.caseId &&
      grant.task_id === p.taskId &&
      grant.packet_digest === p.packetDigest;
    if (!matches) {
      logger.warn({ messageId: e.id, gateId: p.gateId, grantId: p.grantId ?? null }, 'approval does not match any grant; nothing dispatched');
      // Recorded in the grant's case only when the grant is really of this case (evidence for
      // the case's auditors; the grant and its gate are untouched).
      if (grant && grant.case_id === e.caseId) {
        await uow.appendLedger(e.caseId, { kind: 'dispatch_refused', body: { messageId: e.id, gateId: p.gateId, grantId: grant.id, reason: 'the approval does not match its grant (gate, task, digest or sender)' } });
      }
      return refusedBecause('the approval does not match its grant (gate, task, digest or sender)');
    }
    const unsupported = gateVerdictRefusal({ senderService: e.sender.service, caseId: e.caseId, taskId: p.taskId, packetDigest: p.packetDigest, outcome: 'approved' }, await loadGateRecord(uow, p.gateId));
    if (unsupported !== null) {
      logger.warn({ messageId: e.id, gateId: p.gateId, grantId: grant.id }, 'approval not borne out by the gate record; nothing dispatched');
      return refusedBecause(unsupported);
    }
    const queued = await queueDispatch(uow, { grantId: grant.id, gateId: p.gateId, caseId: e.caseId, taskId: p.taskId });
    if (!queued) {
      await uow.appendLedger(e.caseId, { kind: 'grant_reuse_refused', body: { messageId: e.id, gateId: p.gateId, grantId: grant.id } });
      return 'ignored';
    }
    await uow.appendLedger(e.caseId, { kind: 'effect_queued', body: { gateId: p.gateId, grantId: grant.id, packetDigest: grant.packet_digest } });
    await notifyAtCommit(uow, DISPATCH_CHANNEL);
    return 'applied';
  };
}
