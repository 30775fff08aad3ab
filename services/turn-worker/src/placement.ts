/**
 * What a turn places besides its write, in the turn's unit of work under the task's fence and
 * BEFORE the write (which may give the fence up): the children it spawned (K4), its plan
 * revision (§11.3), the write it proposed (packet paper, gate request), the questions it puts and
 * answers (questions.ts), a compaction of its conversation, and the note of a turn that resumes
 * at once. All of them commit or vanish with the turn's write; their ledger records precede the
 * turn's own record in the case's chain.
 */
import { canonicalJson, payloadHash } from '@everdict/contracts';
import type { RunState } from '@everdict/agent-runtime';
import { addNote, caseTypeOf, createChildTask, PACKET_PAPER_SCHEMA, recordPlanRevision } from '@everdict/store';
import type { UnitOfWork } from '@everdict/store';
import { heldAuthority, narrowForChild } from './authority.js';
import type { Catalog } from './catalog.js';
import { buildSummary, compactionCut, summaryBytes, summaryMessage, summaryMisses, SUMMARY_SCHEMA } from './compaction.js';
import type { CompactionLimit } from './compaction.js';
import { send, sendRunnable } from './envelopes.js';
import { questionProtocol } from './questions.js';
import type { HostState } from './statePaper.js';
import type { TaskRun } from './turn.js';
import type { PlacedChild } from './turnBuffer.js';
import type { ParkTransition } from './turnWrite.js';
import type { ProposalTurn } from './writesPropose.js';

/** The held task a placement writes for. */
export type Placer = Pick<TaskRun, 'task' | 'token' | 'rootTaskId'>;

/** Creates a child task under the parent's fence and makes it runnable (idempotent per spawn call). */
export async function placeChild(catalog: Catalog, uow: UnitOfWork, at: Placer, child: PlacedChild): Promise<void> {
  const { task, token } = at;
  const childProfile = catalog.childProfileOf(task.profile);
  const profile = catalog.profile(childProfile);
  // A root holds its case type's initial grants; a case type no longer configured grants nothing.
  const rootGrants = task.parent_id === null ? (catalog.loaded.config.caseTypes[(await caseTypeOf(uow, task.case_id)) ?? '']?.initialGrants ?? []) : [];
  const narrowed = narrowForChild(task.id, heldAuthority(task, rootGrants), { papers: child.papers, grants: child.grants });
  const created = await createChildTask(uow, token, {
    id: child.childTaskId,
    caseId: task.case_id,
    parentId: task.id,
    rootTaskId: at.rootTaskId,
    depth: child.depth,
    ancestry: [...task.ancestry, task.id],
    spawnCallId: child.spawnCallId,
    profile: childProfile,
    profileVersion: profile.version,
    objective: { text: child.objective },
    // The narrowed execution context (§3): the parent's envelope verbatim (K4: its budget
    // re-counts from zero), the declared tools, and the papers and grants it may use — what the
    // spawn asked for that the parent itself holds, never more (authority.ts).
    context: { envelope: child.envelope, mode: child.mode, tools: child.toolNames, ...narrowed.context },
  });
  if (!created) return;
  await sendRunnable(uow, { id: child.childTaskId, case_id: task.case_id }, 'opened', task, token);
  await uow.appendLedger(task.case_id, {
    kind: 'child_placed',
    body: { taskId: task.id, childTaskId: child.childTaskId, tools: child.toolNames, permittedPapers: narrowed.context.permittedPapers, grants: narrowed.context.grants, withheld: narrowed.withheld },
  });
}

/**
 * Records the plan revision, stamped with the task's row version under the fence lock. Only the
 * root asks a human; a child's plan goes to its immediate parent (§11.3) as `plan.submitted`.
 */
export async function placePlan(uow: UnitOfWork, at: Placer, plan: NonNullable<RunState['plan']>, rowVersion: number): Promise<void> {
  const { task, token } = at;
  const steps = plan.steps.map((s) => ({ stepId: s.id, title: s.title.slice(0, 200), dependsOn: [...new Set(s.dependsOn)] }));
  const planHash = payloadHash({ taskId: task.id, revision: plan.revision, steps });
  await recordPlanRevision(uow, token, { revision: plan.revision, planHash, steps, rowVersion });
  if (task.parent_id === null) return;
  await send(
    uow,
    'plan.submitted',
    { taskId: task.id, parentTaskId: task.parent_id, revision: plan.revision, expectedRevision: plan.revision - 1, rowVersion, planHash, steps, ...(plan.note ? { summary: plan.note.slice(0, 4000) } : {}) },
    { caseId: task.case_id, from: task, fence: token },
  );
}

/**
 * The proposal's durable half: the case's ledger records of `writes__propose`, and for a new gate
 * the exact packet as a paper and the `gate.requested` that names it.
 */
export async function placeProposal(uow: UnitOfWork, at: Placer, proposing: ProposalTurn): Promise<void> {
  const { task, token } = at;
  for (const l of proposing.ledger) await uow.appendLedger(task.case_id, l);
  const proposal = proposing.proposal;
  if (proposal?.kind !== 'gate') return;
  const packet = proposal.packet;
  const paper = await uow.putPaper({ caseId: task.case_id, kind: 'artefact', name: `packets/${proposal.gateId}`, schemaId: PACKET_PAPER_SCHEMA, bytes: Buffer.from(canonicalJson(packet), 'utf8') });
  await send(
    uow,
    'gate.requested',
    {
      gateId: proposal.gateId,
      taskId: task.id,
      callId: proposal.callId,
      packetDigest: packet.digest,
      packetPaperId: paper.paperId,
      planStepId: packet.planStepId,
      operation: packet.operation.name,
      effectClass: packet.effectClass,
      impactKeys: [...packet.impactKeys],
      ...(packet.summary ? { summary: packet.summary.slice(0, 4000) } : {}),
    },
    { caseId: task.case_id, from: task, fence: token },
  );
  await uow.appendLedger(task.case_id, {
    kind: 'effect_proposed',
    body: {
      taskId: task.id,
      gateId: proposal.gateId,
      proposeCallId: proposal.callId,
      digest: packet.digest,
      mutationKey: proposal.mutationKey,
      operation: `${packet.operation.connector}/${packet.operation.name}`,
      audit: { verdict: proposal.audit.verdict, by: proposal.audit.by, reason: proposal.audit.reason, reads: [...(proposal.audit.reads ?? [])] },
      evidence: (packet.evidence ?? []).map((c) => ({ ...c })),
    },
  });
}

/**
 * A park that asks (`ask`): answers the task's sub-agents and puts its own question through the
 * question protocol; returns the park with what its detail gains (the question's id, whom it asks).
 */
export async function placeQuestions(uow: UnitOfWork, at: Placer, park: ParkTransition, wait: RunState['wait']): Promise<ParkTransition> {
  const asked = await questionProtocol(uow, at, park.reason, wait);
  if (asked.humanQuestionId !== null) {
    await uow.appendLedger(at.task.case_id, { kind: 'question_asked', body: { taskId: at.task.id, questionId: asked.humanQuestionId, askedBy: at.rootTaskId } });
  }
  return { ...park, detail: { ...park.detail, ...asked.detail } };
}

/** The note a turn that resumes at once carries into the next; its seq (null: already added). */
export function placeResumeNote(uow: UnitOfWork, at: Placer, note: string): Promise<number | null> {
  return addNote(uow, at.task.id, 'info', { text: note }, null);
}

/** Replaces the earlier messages by a derived summary paper, if the summary keeps everything. */
export async function compact(uow: UnitOfWork, at: Placer, limit: CompactionLimit, run: RunState, host: HostState): Promise<{ run: RunState; host: HostState }> {
  const cut = compactionCut(run, limit);
  if (cut <= 1) return { run, host };
  const summary = buildSummary(run, host, run.messages.slice(0, cut));
  if (summaryMisses(summary, run, host).length > 0) return { run, host }; // keep the previous summary
  const paper = await uow.putPaper({ caseId: at.task.case_id, kind: 'derived', name: `tasks/${at.task.id}/summary`, schemaId: SUMMARY_SCHEMA, bytes: summaryBytes(summary) });
  return {
    run: { ...run, messages: [summaryMessage(summary, paper), ...run.messages.slice(cut)] },
    host: { ...host, summary: { paperId: paper.paperId, revision: paper.revision, turn: run.turn } },
  };
}
