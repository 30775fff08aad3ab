/**
 * The `writes__propose` control tool (DESIGN §6; `writes.propose` in the seeds): the model's
 * proposal becomes an audited effect packet and a gate request — or, for a change proposed
 * before, the recorded receipt, the outcome still being reconciled, or the gate already asked.
 *
 * It executes nothing. What it decides is held in the turn's buffer (`TurnBuffer.proposal`) and
 * written by the turn's final unit of work with the checkpoint: the packet paper, the
 * `gate.requested` message, the ledger records and the task's park on the gate. The only rows it
 * writes before that are the journal rows of the auditor's own reads (auditReads.ts), each
 * durable before and after it runs, so a turn that dies and runs the handler again never repeats
 * a completed read; everything else it reads (evidence, mutation lookup, receipts) is repeatable.
 *
 * Order of checks: step references resolved → cited evidence resolved (evidence.ts) → mechanical
 * checks (proposal.ts) → mutation identity (an earlier receipt / unknown outcome / live gate wins
 * over a new proposal) → independent audit → new gate.
 */
import { newId, packetMutationKey, sealPacket } from '@everdict/contracts';
import type { EffectPacket, ExecutionEnvelope } from '@everdict/contracts';
import { kernelRegistry } from '@everdict/agent-runtime';
import type { Tool, ToolOutput } from '@everdict/agent-runtime';
import { gatesOfMutation, landedOfStep, lookupMutation } from '@everdict/store';
import type { Db, FenceToken } from '@everdict/store';
import type { ModelClient } from '@everdict/llm';
import type { FleetConfig, FleetProfile } from '@everdict/contracts';
import { auditPacket } from './auditor.js';
import type { AuditTools, AuditVerdict } from './auditor.js';
import { runAuditRead } from './auditReads.js';
import { resolveEvidence, toolOrigins } from './evidence.js';
import { readPermittedPaper } from './paperAccess.js';
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
  /** The running turn's fence: the auditor's own reads are journalled under it (auditReads.ts). */
  readonly token: FenceToken;
  readonly plan: { readonly revision: number; readonly stepIds: readonly string[] } | null;
  proposal: ProposalRecord | null;
  readonly ledger: ProposalLedger[];
}

interface ProposeDeps {
  readonly db: Db;
  /** The fleet config in force (connectors, profiles). */
  readonly fleet: () => Pick<FleetConfig, 'connectors' | 'profiles' | 'mcpServers'>;
  /** The auditor of a profile's proposals, or why there is none. */
  readonly auditorOf: (profileName: string) => { readonly name: string; readonly profile: FleetProfile; readonly client: ModelClient } | { readonly missing: string };
  /** The running turn of a task (set by durableTurn for the length of the turn). */
  readonly turnOf: (taskId: string) => ProposalTurn | undefined;
  /** The auditor profile's own read tools (its `reads`, its read-only MCP tools); none by default. */
  readonly auditorTools?: (auditorName: string) => Promise<readonly Tool[]>;
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

      // 2. Cited evidence: each citation must name a completed read of this task or a paper it may read.
      const evidence = await resolveEvidence(
        { db: deps.db, caseId: turn.caseId, taskId: ctx.taskId, origins: toolOrigins(deps.fleet()), readPaper: (ref) => readPermittedPaper(deps.db, turn.caseId, ctx.taskId, ref) },
        args.evidence ?? [],
      );
      if (!evidence.ok) return refused(`Proposal refused before audit: ${evidence.problems.join('; ')}.`);

      // 3. Mechanical checks → the packet (carrying the citations).
      const citations = evidence.items.map((it) => it.citation);
      const built = buildPacket(args, resolved.params, { caseId: turn.caseId, envelope: turn.envelope, fleet: deps.fleet(), plan: turn.plan, evidence: citations });
      if (!built.ok) return refused(`Proposal refused before audit: ${built.problems.join('; ')}.`);
      const packet = built.packet;
      const mutationKey = packetMutationKey(packet);

      // 4. Mutation identity: the same change proposed again never becomes a second operation.
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

      // 5. Independent audit: packet + cited evidence with provenance; the auditor's own reads.
      const auditor = deps.auditorOf(turn.profileName);
      if ('missing' in auditor) return refused(`Proposal refused: ${auditor.missing}.`);
      let audit: AuditVerdict;
      try {
        const own = (await deps.auditorTools?.(auditor.name)) ?? [];
        const tools = own.length === 0 ? null : auditTools(deps.db, turn, ctx.turn, `${auditor.name}@${auditor.profile.version}`, own);
        audit = await auditPacket(auditor.client, auditor, packet, evidence.items, tools, ctx.signal);
      } catch (err) {
        const kind = (err as { kind?: string; code?: string }).kind ?? (err as { code?: string }).code ?? 'error';
        return refused(`The audit is unavailable right now (${kind}); nothing was proposed. Propose again later.`);
      }
      const sealed = sealPacket(packet);
      if (audit.verdict !== 'approve') {
        turn.ledger.push({
          kind: 'effect_audit',
          body: { mutationKey, digest: sealed.digest, verdict: 'reject', by: audit.by, reason: audit.reason, proposeCallId: ctx.callId, evidence: citations, auditReads: audit.reads ?? [] },
        });
        return refused(`The auditor rejected the proposal: ${audit.reason}`);
      }
      const withVerdict = sealPacket({ ...packet, verdicts: [{ kind: 'audit', decision: 'audit', verdict: 'approve', digest: sealed.digest, by: audit.by, reason: audit.reason }] });
      const gateId = newId();
      turn.proposal = { kind: 'gate', gateId, callId: ctx.callId, packet: withVerdict, mutationKey, audit };
      return { content: `Proposal passed audit and awaits gate ${gateId} (digest ${withVerdict.digest}). Your task waits for the decision; you will be told what landed.` };
    },
  };
}

/** The auditor's read tools over the proposing turn's journal (auditReads.ts). */
function auditTools(db: Db, turn: ProposalTurn, turnNo: number, by: string, own: readonly Tool[]): AuditTools {
  const reads = own.filter((t) => t.descriptor.access === 'read');
  const byName = new Map(reads.map((t) => [t.descriptor.name, t] as const));
  const registry = kernelRegistry(reads, { intrinsics: [] });
  const scope = { db, token: turn.token, caseId: turn.caseId, turn: turnNo, envelope: turn.envelope, by };
  return {
    specs: reads.map((t) => ({ name: t.descriptor.name, description: t.descriptor.description, inputSchema: t.descriptor.inputSchema })),
    async run(name, args, signal) {
      return runAuditRead(scope, byName, registry, name, args, signal);
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
