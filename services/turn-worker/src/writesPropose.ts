/**
 * The `writes__propose` control tool (DESIGN §6; `writes.propose` in the seeds): the model's
 * proposal becomes an audited effect packet and a gate request — or, for a change proposed
 * before, the recorded receipt, the outcome still being reconciled, or the gate already asked.
 *
 * It executes nothing and writes nothing itself. What it decides is held in the turn's buffer
 * (`TurnBuffer.proposal`) and written by the turn's final unit of work with the checkpoint: the
 * packet paper, the `gate.requested` message, the ledger records and the task's park on the
 * gate. A turn that dies before that commit leaves nothing behind, so running the handler again
 * is safe; its reads (mutation lookup, receipts) and the auditor's review are repeatable.
 *
 * Order of checks: step references resolved → mechanical checks (proposal.ts) → mutation
 * identity (an earlier receipt / unknown outcome / live gate wins over a new proposal) →
 * independent audit → new gate.
 */
import { newId, packetMutationKey, sealPacket } from '@everdict/contracts';
import type { EffectPacket, ExecutionEnvelope } from '@everdict/contracts';
import type { Tool, ToolOutput } from '@everdict/agent-runtime';
import { gatesOfMutation, landedOfStep, lookupMutation } from '@everdict/store';
import type { Db } from '@everdict/store';
import type { ModelClient } from '@everdict/llm';
import type { FleetConfig, FleetProfile } from '@everdict/contracts';
import { auditPacket } from './auditor.js';
import type { AuditVerdict } from './auditor.js';
import { buildPacket, priorStep, PROPOSE_DESCRIPTION, PROPOSE_INPUT_SCHEMA, PROPOSE_TOOL, referencedSteps, resolveStepRefs } from './proposal.js';
import type { PriorMutation, ProposalArgs } from './proposal.js';

/** What a proposal leaves for the turn's commit. */
export type ProposalRecord =
  /** A new packet: audit approved it; the commit writes the paper, the gate request and parks on it. */
  | { readonly kind: 'gate'; readonly gateId: string; readonly callId: string; readonly packet: EffectPacket & { digest: string }; readonly mutationKey: string; readonly audit: AuditVerdict }
  /** The same change already awaits this gate: the task parks on it. */
  | { readonly kind: 'pending_gate'; readonly gateId: string; readonly packetDigest: string; readonly mutationKey: string }
  /** The same change is being reconciled: the task parks until its outcome arrives. */
  | { readonly kind: 'reconciling'; readonly effectCallId: string; readonly mutationKey: string };

/** A ledger record the proposal owes the case (audit refusals, receipts returned again). */
export interface ProposalLedger {
  readonly kind: string;
  readonly body: Record<string, unknown>;
}

/** The running turn's side of a proposal: where it records, and what it proposes under. */
export interface ProposalTurn {
  readonly caseId: string;
  readonly envelope: ExecutionEnvelope;
  readonly profileName: string;
  readonly plan: { readonly revision: number; readonly stepIds: readonly string[] } | null;
  proposal: ProposalRecord | null;
  readonly ledger: ProposalLedger[];
}

interface ProposeDeps {
  readonly db: Db;
  /** The fleet config in force (connectors, profiles). */
  readonly fleet: () => Pick<FleetConfig, 'connectors' | 'profiles'>;
  /** The auditor of a profile's proposals, or why there is none. */
  readonly auditorOf: (profileName: string) => { readonly name: string; readonly profile: FleetProfile; readonly client: ModelClient } | { readonly missing: string };
  /** The running turn of a task (set by durableTurn for the length of the turn). */
  readonly turnOf: (taskId: string) => ProposalTurn | undefined;
}

const refused = (content: string): ToolOutput => ({ content, isError: true });

export function writesProposeTool(deps: ProposeDeps): Tool {
  return {
    descriptor: {
      name: PROPOSE_TOOL,
      description: PROPOSE_DESCRIPTION,
      inputSchema: PROPOSE_INPUT_SCHEMA as unknown as Record<string, unknown>,
      // A proposal is the write path (K3: the real access kind), though it executes nothing:
      // the scope gate and the permission hook see it as a write.
      access: 'write',
      // Nothing of a proposal is durable before the turn's commit, which records its outcome
      // too: after a crash mid-turn it simply runs again (never withheld as unknown).
      outcomeAtomic: true,
      origin: 'first_party',
      transport: 'in_process',
      argumentValidation: 'kernel',
    },
    async invoke(raw, ctx) {
      const turn = deps.turnOf(ctx.taskId);
      if (!turn) return refused('Proposals are not available in this run.');
      if (turn.proposal !== null) return refused('Only one write proposal per turn: this task already waits on one.');
      const args = raw as unknown as ProposalArgs;

      // 1. Returned ids of earlier steps, bound before anything looks at the packet.
      const receipts = new Map<string, Record<string, unknown> | undefined>();
      for (const step of referencedSteps(args.params)) receipts.set(step, (await landedOfStep(deps.db, turn.caseId, step))?.receipt);
      const resolved = resolveStepRefs(args.params, receipts);
      if (!resolved.ok) return refused(`Proposal refused: ${resolved.problems.join('; ')}.`);

      // 2. Mechanical checks → the packet.
      const built = buildPacket(args, resolved.params, { caseId: turn.caseId, envelope: turn.envelope, fleet: deps.fleet(), plan: turn.plan });
      if (!built.ok) return refused(`Proposal refused before audit: ${built.problems.join('; ')}.`);
      const packet = built.packet;
      const mutationKey = packetMutationKey(packet);

      // 3. Mutation identity: the same change proposed again never becomes a second operation.
      const step = priorStep(await priorOf(deps.db, turn.caseId, mutationKey));
      switch (step.kind) {
        case 'receipt':
          turn.ledger.push({ kind: 'effect_receipt_returned', body: { mutationKey, callId: step.callId, proposeCallId: ctx.callId } });
          return { content: `This change was already applied (call ${step.callId}; ${step.established}). Receipt: ${JSON.stringify(step.receipt ?? {})}` };
        case 'reconciling':
          turn.proposal = { kind: 'reconciling', effectCallId: step.callId, mutationKey };
          return { content: `This change was already sent (call ${step.callId}) and its outcome is still being established. Your task waits until it is known; nothing is sent again.` };
        case 'pending_gate':
          turn.proposal = { kind: 'pending_gate', gateId: step.gateId, packetDigest: step.packetDigest, mutationKey };
          return { content: `This change already awaits gate ${step.gateId}. Your task waits for that decision; no second gate is asked.` };
        case 'new':
          break;
      }

      // 4. Independent audit: packet + cited evidence only.
      const auditor = deps.auditorOf(turn.profileName);
      if ('missing' in auditor) return refused(`Proposal refused: ${auditor.missing}.`);
      let audit: AuditVerdict;
      try {
        audit = await auditPacket(auditor.client, auditor, packet, args.evidence ?? [], ctx.signal);
      } catch (err) {
        const kind = (err as { kind?: string; code?: string }).kind ?? (err as { code?: string }).code ?? 'error';
        return refused(`The audit is unavailable right now (${kind}); nothing was proposed. Propose again later.`);
      }
      const sealed = sealPacket(packet);
      if (audit.verdict !== 'approve') {
        turn.ledger.push({ kind: 'effect_audit', body: { mutationKey, digest: sealed.digest, verdict: 'reject', by: audit.by, reason: audit.reason, proposeCallId: ctx.callId } });
        return refused(`The auditor rejected the proposal: ${audit.reason}`);
      }
      const withVerdict = sealPacket({ ...packet, verdicts: [{ kind: 'audit', decision: 'audit', verdict: 'approve', digest: sealed.digest, by: audit.by, reason: audit.reason }] });
      const gateId = newId();
      turn.proposal = { kind: 'gate', gateId, callId: ctx.callId, packet: withVerdict, mutationKey, audit };
      return { content: `Proposal passed audit and awaits gate ${gateId} (digest ${withVerdict.digest}). Your task waits for the decision; you will be told what landed.` };
    },
  };
}

async function priorOf(db: Db, caseId: string, mutationKey: string): Promise<PriorMutation> {
  const [found, gates] = await Promise.all([lookupMutation(db, mutationKey), gatesOfMutation(db, caseId, mutationKey)]);
  let journal: PriorMutation['journal'];
  switch (found.kind) {
    case 'none':
      journal = { kind: 'none' };
      break;
    case 'completed':
      journal = { kind: 'completed', callId: found.call.id, receipt: found.landed?.receipt ?? null, established: found.landed?.established ?? 'recorded as completed' };
      break;
    case 'in_doubt':
      journal = { kind: 'in_doubt', callId: found.call.id };
      break;
    case 'failed':
      journal = { kind: 'failed', callId: found.call.id };
      break;
  }
  return { journal, gates };
}
