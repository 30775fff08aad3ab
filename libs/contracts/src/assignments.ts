/**
 * Persisted-assignment checks (seed 004 §4): whether a receiver may act on a message, decided
 * from the rows it read in the delivery's unit of work — never from what the message claims.
 * Pure: each function takes the message's claims and the persisted facts and returns null (the
 * message stands) or the reason it is refused. A refused message changes nothing; the consumer
 * dead-letters and counts it.
 */

/** A gate as recorded: its state, the decisions it needs and every decision given. */
export interface GateFacts {
  readonly case_id: string;
  readonly task_id: string;
  readonly packet_digest: string;
  readonly state: string;
  readonly required_decisions: readonly { readonly decision: string }[];
  readonly reason: string | null;
  readonly decisions: readonly { readonly decision: string; readonly verdict: string; readonly digest: string }[];
}

/** What a `gate.decided` claims. */
export interface GateVerdictClaim {
  readonly senderService: string;
  readonly caseId: string;
  readonly taskId: string;
  readonly packetDigest: string;
  readonly outcome: 'approved' | 'rejected' | 'expired' | 'revoked';
}

/** Who may close a gate with each outcome: the gate decides; the reconciler also expires. */
const GATE_CLOSERS: Readonly<Record<GateVerdictClaim['outcome'], readonly string[]>> = {
  approved: ['gate'],
  rejected: ['gate'],
  revoked: ['gate'],
  expired: ['gate', 'reconciler'],
};

/**
 * A gate's final answer stands only when the gate's own record says so: approved ⇒ the gate was
 * approved (it may have been revoked since) and every required decision was approved for the
 * gate's digest; rejected ⇒ a reject
 * was recorded for that digest (or the gate was refused at request, with its reason); expired
 * and revoked ⇒ the gate is recorded so.
 */
export function gateVerdictRefusal(claim: GateVerdictClaim, gate: GateFacts | undefined): string | null {
  if (!GATE_CLOSERS[claim.outcome].includes(claim.senderService)) return `${claim.senderService} does not close gates as ${claim.outcome}`;
  if (!gate) return 'no such gate';
  if (gate.case_id !== claim.caseId || gate.task_id !== claim.taskId) return 'the gate belongs to another task or case';
  if (gate.packet_digest !== claim.packetDigest) return 'packetDigest is not the gate\'s digest';
  const onDigest = gate.decisions.filter((d) => d.digest === gate.packet_digest);
  switch (claim.outcome) {
    case 'approved': {
      // A gate revoked after its approval keeps the approval it sent (its grant is refused at dispatch).
      if (gate.state !== 'approved' && gate.state !== 'revoked') return `the gate is ${gate.state}, not approved`;
      const missing = gate.required_decisions.filter((r) => !onDigest.some((d) => d.decision === r.decision && d.verdict === 'approve'));
      return missing.length === 0 ? null : `decision ${missing[0]!.decision} was not approved for the gate's digest`;
    }
    case 'rejected': {
      if (gate.state !== 'rejected') return `the gate is ${gate.state}, not rejected`;
      const refusedAtRequest = gate.required_decisions.length === 0 && gate.reason !== null;
      return refusedAtRequest || onDigest.some((d) => d.verdict === 'reject') ? null : 'no reject is recorded for the gate';
    }
    case 'expired':
    case 'revoked':
      return gate.state === claim.outcome ? null : `the gate is ${gate.state}, not ${claim.outcome}`;
  }
}

/** `effect.outcome` is the coordinator's (or the reconciler's) report of a journalled dispatch. */
export function effectOutcomeRefusal(senderService: string, journalled: boolean): string | null {
  if (senderService !== 'execution-coordinator' && senderService !== 'reconciler') return `${senderService} does not report what landed`;
  return journalled ? null : 'no journalled dispatch of that call and grant for that task and case';
}

/** The task a control message targets, as persisted. */
export interface TargetFacts {
  readonly case_id: string;
  readonly ancestry: readonly string[];
}

/**
 * `task.cancel` comes from intake on a recorded operator action, or from an ancestor task of
 * the target in the same case (the sender task is persisted in that case).
 */
export function cancelRefusal(
  claim: { readonly senderService: string; readonly senderTaskId: string | null; readonly caseId: string },
  target: TargetFacts,
  facts: { readonly operatorActionRecorded: boolean; readonly senderTaskCase: string | null },
): string | null {
  if (claim.senderTaskId !== null) {
    if (claim.senderService !== 'turn-worker') return `${claim.senderService} does not cancel on a task's behalf`;
    if (!target.ancestry.includes(claim.senderTaskId)) return 'the sender task is not an ancestor of the target';
    if (facts.senderTaskCase !== target.case_id || claim.caseId !== target.case_id) return 'the sender task is not of the target\'s case';
    return null;
  }
  if (claim.senderService !== 'intake') return `${claim.senderService} does not cancel tasks`;
  return facts.operatorActionRecorded ? null : 'no recorded operator cancel for this task';
}

/** Operator controls (`budget.topped_up`, `task.resume`) come from intake on a recorded operator action. */
export function operatorControlRefusal(senderService: string, operatorActionRecorded: boolean): string | null {
  if (senderService !== 'intake') return `${senderService} does not speak for an operator`;
  return operatorActionRecorded ? null : 'no recorded operator action sent this message';
}

/** What a `gate.requested` claims, and what is persisted about it. */
export interface GateRequestFacts {
  readonly senderService: string;
  readonly senderTaskId: string | null;
  readonly taskId: string;
  readonly gateId: string;
  /** The named task's case, if the task exists. */
  readonly taskCase: string | null;
  readonly caseId: string;
  /** The named packet paper (case and name), if any. */
  readonly paper: { readonly case_id: string; readonly name: string } | null;
  /** Another open gate of the same packet in the case, if any. */
  readonly otherOpenGate: string | null;
}

/** The paper name the proposing turn gives a gate's packet. */
export const packetPaperName = (gateId: string): string => `packets/${gateId}`;

/**
 * A gate request stands only from the task it names (sender task = payload task, of that case),
 * for the packet paper the proposing turn wrote for this very gate (`packets/<gateId>` in the
 * case, written in the unit of work that sent the request), and never opens a second gate for
 * one packet.
 */
export function gateRequestRefusal(f: GateRequestFacts): string | null {
  if (f.senderService !== 'turn-worker' || f.senderTaskId === null) return 'a gate request comes from the proposing task';
  if (f.senderTaskId !== f.taskId) return 'the sender is not the task the request names';
  if (f.taskCase === null || f.taskCase !== f.caseId) return 'the task is not of that case';
  if (f.paper === null || f.paper.case_id !== f.caseId || f.paper.name !== packetPaperName(f.gateId)) return 'the packet paper is not the one the task wrote for this gate';
  if (f.otherOpenGate !== null) return `gate ${f.otherOpenGate} is already open for this packet`;
  return null;
}

/**
 * The ledger record intake writes, in the unit of work that sends an operator control, and that
 * the receiver looks for (jsonb containment on its body): a top-up and a resume name the message
 * they sent; a cancel names the root task, mode and requester it was sent for.
 */
export function operatorActionOf(type: string, payload: { readonly taskId: string; readonly mode?: string; readonly requestedBy?: string }, messageId: string): { kind: string; match: Record<string, unknown> } | undefined {
  switch (type) {
    case 'budget.topped_up':
      return { kind: 'budget_top_up_requested', match: { taskId: payload.taskId, messageId } };
    case 'task.resume':
      return { kind: 'case_resume_requested', match: { rootTaskId: payload.taskId, messageId } };
    case 'task.cancel':
      return { kind: 'case_cancel_requested', match: { rootTaskId: payload.taskId, mode: payload.mode, ...(payload.requestedBy !== undefined ? { requestedBy: payload.requestedBy } : {}) } };
    default:
      return undefined;
  }
}
