/**
 * `gate.requested` → a GATES row (seed 004 §5). Runs inside the delivery's unit of work, so the
 * inbox row, the gate, its ledger record and any refusal message commit together.
 *
 * Who may ask (gateRequestRefusal, contracts): the task the request names, as its sender, for
 * the packet paper it wrote for this gate, with no other gate of that packet open; anything else
 * is refused (dead-lettered and counted) and opens nothing.
 *
 * The gate trusts nothing the request claims about the packet: it reads the exact packet paper
 * revision, checks that its content hashes to the requested digest and belongs to the case, and
 * derives the decisions itself. A request that fails any of that is recorded as a rejected gate
 * and answered with `gate.decided` rejected and the reason — back to the agent as a refused
 * proposal; nothing is left open that a human could approve by mistake.
 */
import { gateRequestRefusal, isEverdictError, packetMutationKey, verifyPacketDigest } from '@everdict/contracts';
import type { Envelope, FleetConfig } from '@everdict/contracts';
import { refusedBecause } from '@everdict/bus';
import type { MessageHandler } from '@everdict/bus';
import { enqueuePlatformMessage, loadGate, loadTaskForEffect, openGate, openGateOfPacket, paperHeadRevision, paperIdentity, readPacketPaper } from '@everdict/store';
import type { StoredPacket, UnitOfWork } from '@everdict/store';
import type { DecisionDerivation } from './policy.js';
import { deriveDecisions } from './policy.js';

export const GATE_SERVICE = 'gate';

interface GateRequestOptions {
  /** How long an undecided gate stays open when the request names no expiry, in ms. */
  readonly gateTtlMs: number;
  /** The fleet config as loaded at start (gate policies, registered operations). */
  readonly fleet: () => Pick<FleetConfig, 'gatePolicies' | 'connectors'>;
}

type Request = Envelope<'gate.requested'>;

export function gateRequestedHandler(opts: GateRequestOptions): MessageHandler<Request> {
  return async (e, uow) => {
    const p = e.payload;
    if (await loadGate(uow, p.gateId)) return 'ignored';
    const task = await loadTaskForEffect(uow, p.taskId);
    // A request must come from the task it names, in the case it names, for the packet paper
    // that task wrote for this gate, and one packet has at most one open gate (§4: checked
    // against persisted assignments). Anything else is refused before anything is recorded.
    const refusal = gateRequestRefusal({
      senderService: e.sender.service,
      senderTaskId: e.sender.taskId,
      taskId: p.taskId,
      gateId: p.gateId,
      taskCase: task?.case_id ?? null,
      caseId: e.caseId,
      paper: p.packetPaperId === undefined ? null : ((await paperIdentity(uow, p.packetPaperId)) ?? null),
      otherOpenGate: (await openGateOfPacket(uow, e.caseId, p.packetDigest, p.gateId)) ?? null,
    });
    if (refusal !== null) return refusedBecause(refusal);

    const problems: string[] = [];
    let stored: (StoredPacket & { paperId: string; revision: number }) | undefined;
    if (p.packetPaperId === undefined) {
      problems.push('the request names no packet paper');
    } else {
      stored = await loadPacket(uow, p.packetPaperId, e.caseId, problems);
    }
    let derivation: DecisionDerivation | undefined;
    let mutationKey: string | null = null;
    if (stored) {
      const packet = stored.packet;
      if (!verifyPacketDigest(packet, p.packetDigest)) problems.push('the packet paper does not hash to packetDigest');
      if (packet.caseId !== e.caseId) problems.push('the packet belongs to another case');
      if (packet.operation.name !== p.operation) problems.push('operation differs from the packet operation');
      if (packet.effectClass !== p.effectClass) problems.push('effectClass differs from the packet effect class');
      if (problems.length === 0) {
        mutationKey = packetMutationKey(packet);
        derivation = deriveDecisions(
          { connector: packet.operation.connector, operation: packet.operation.name, effectClass: packet.effectClass, requested: p.requiredDecisions ?? [] },
          opts.fleet(),
        );
        problems.push(...derivation.problems);
      }
    }

    const refused = problems.length > 0;
    const reason = refused ? `gate refused: ${problems.join('; ')}` : null;
    await openGate(uow, {
      id: p.gateId,
      caseId: e.caseId,
      taskId: p.taskId,
      packetDigest: p.packetDigest,
      operation: p.operation,
      effectClass: p.effectClass,
      requiredDecisions: refused ? [] : (derivation?.decisions ?? []),
      state: refused ? 'rejected' : 'open',
      expiresAt: p.expiresAt ?? null,
      ttlMs: opts.gateTtlMs,
      packetPaperId: stored?.paperId ?? null,
      packetRevision: stored?.revision ?? null,
      mutationKey,
      proposeCallId: p.callId ?? null,
      impactKeys: stored?.packet.impactKeys ?? p.impactKeys ?? [],
      summary: stored?.packet.summary ?? p.summary ?? null,
      reason,
    });

    if (refused) {
      await uow.appendLedger(e.caseId, { kind: 'gate_refused', body: { gateId: p.gateId, taskId: p.taskId, packetDigest: p.packetDigest, problems } });
      await enqueuePlatformMessage(uow, GATE_SERVICE, 'gate.decided', e.caseId, {
        gateId: p.gateId,
        taskId: p.taskId,
        packetDigest: p.packetDigest,
        outcome: 'rejected',
        reason: reason!.slice(0, 2000),
      });
      return 'applied';
    }
    await uow.appendLedger(e.caseId, {
      kind: 'gate_opened',
      body: { gateId: p.gateId, taskId: p.taskId, packetDigest: p.packetDigest, operation: p.operation, effectClass: p.effectClass, decisions: derivation?.decisions ?? [], mutationKey },
    });
    return 'applied';
  };
}

/** The head revision of the packet paper, pinned: later revisions never change what this gate approves. */
async function loadPacket(uow: UnitOfWork, paperId: string, caseId: string, problems: string[]): Promise<(StoredPacket & { paperId: string; revision: number }) | undefined> {
  const head = await paperHeadRevision(uow, paperId);
  if (!head || head.caseId !== caseId) {
    problems.push('the packet paper does not exist in this case');
    return undefined;
  }
  try {
    return { ...(await readPacketPaper(uow, paperId, head.revision)), paperId, revision: head.revision };
  } catch (err) {
    if (isEverdictError(err, 'paper_missing') || isEverdictError(err, 'paper_corrupt')) {
      problems.push(`the packet paper is unusable (${err.code})`);
      return undefined;
    }
    throw err;
  }
}
