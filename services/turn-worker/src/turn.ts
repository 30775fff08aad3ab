/**
 * One durable turn (seed 004 §2, DESIGN §5) of a task this worker holds the lease of.
 *
 * Commits — what each task's turn goes through (the benchmark's "commits per turn"):
 *   C1  request paper + ordinal-0 intent (+ the notes the request carries) ......... turnJournal
 *       — the model is called only after it is durable, with no transaction open. A turn that
 *       follows another in the same activation gets its C1 written by the previous turn's C3
 *       (the next request is fully determined by the committed state), so it costs no commit;
 *   C2  response paper (the model call completed) + the first batch's tool intents . turnJournal
 *       — before any tool runs (each later sequential batch commits its intents the same way;
 *       a response with no tool call is written by C3 instead);
 *   C3  tool outcomes + offloaded results + children + plan revision + question + state paper
 *       + checkpoint + the next turn's intent + task transition + outbox + one ledger record . here.
 * C1/C2/C3 of the many tasks a worker runs are group-committed: one fenced statement carries the
 * writes of every task due at that moment (libs/store groupCommit.ts); each task's part is
 * fenced on its own. Turns that place children, revise a plan, ask a question or compact commit
 * as a unit of work instead.
 *
 * What each crash point leaves behind, and how the next worker continues (the recovery
 * contract the crash matrix tests):
 *   after_intent        the intent is durable, nothing else of the turn. The model is asked (the
 *                       first real ask — nothing was asked before the kill).
 *   after_model         the answer died in memory. The model is asked again — the only case of a
 *                       second ask, and only because no response was ever persisted.
 *   after_response      C2 is durable. The response is replayed from the journal (no ask); tools
 *                       run under the call ids allocated before the crash.
 *   after_tool_results  C2 is durable; outcomes died in memory. Response replayed; reads whose
 *                       outcome was never persisted run again under their original call id (they
 *                       never completed); a write with an open intent would be withheld as unknown.
 *   after_commit        C3 (or a claim's unit of work) is durable. The checkpoint is restored:
 *                       nothing of that turn runs again; a redelivered message is an inbox duplicate.
 */
import { appendFileSync } from 'node:fs';
import { budgetExhausted, canonicalJson, EverdictError, isEverdictError, newId, payloadHash } from '@everdict/contracts';
import { modelRequestFor, resumeRun, runTurn } from '@everdict/agent-runtime';
import type { CallRecord, KernelClock, KernelDeps, RunContext, RunState, TurnResult } from '@everdict/agent-runtime';
import type { ModelClient } from '@everdict/llm';
import {
  addNote,
  caseTypeOf,
  createChildTask,
  PACKET_PAPER_SCHEMA,
  parkWithBackoff,
  recordPlanRevision,
  reportRouteHealth,
  unreportedChildren,
  writeTurn,
} from '@everdict/store';
import type { FenceToken, GraphTaskRow, JournalCommitter, LedgerHead, NoteRow, OutboxWrite, Store, StoredCall, TransitionWrite, UnitOfWork } from '@everdict/store';
import type { Logger } from 'pino';
import type { AgentView, Catalog } from './catalog.js';
import { canonicalRequestDoc, canonicalTools } from './canonical.js';
import { buildSummary, cutIndex, needsCompaction, summaryBytes, summaryMessage, summaryMisses, SUMMARY_SCHEMA } from './compaction.js';
import type { CrashPoints } from './crashpoints.js';
import { nextProviderAttempt, settle } from './decisions.js';
import type { Transition } from './decisions.js';
import { outboxRow, send, sendRunnable } from './envelopes.js';
import type { TurnMetrics } from './metrics.js';
import { noteDecision, notesMessage } from './notes.js';
import { heldAuthority, narrowForChild } from './authority.js';
import { questionProtocol } from './questions.js';
import { providerBackoffMs } from './settings.js';
import { stateDocument, statePaper } from './statePaper.js';
import type { HostState } from './statePaper.js';
import { committedHandoff, deferredSubAgents, paperResultStore, TurnBuffer } from './turnBuffer.js';
import { modelIntentRow, TurnJournal } from './turnJournal.js';
import type { IntentRow } from './turnJournal.js';
import type { ToolTiming } from './tools.js';
import { PROPOSE_TOOL } from './proposal.js';
import type { ProposalRecord, ProposalTurn } from './writesPropose.js';
import { versionsHash } from './versions.js';

/** A task held by this worker between turns of one activation. */
export interface TaskRun {
  readonly task: GraphTaskRow;
  readonly token: FenceToken;
  readonly rootTaskId: string;
  readonly view: AgentView;
  readonly runCtx: RunContext;
  run: RunState;
  host: HostState;
  /** Journal rows of run.turn found at restore; the next turn consumes them. */
  stored: Map<number, StoredCall>;
  /** Notes the next turn's request carries (pinned to it with its intent). */
  notes: NoteRow[];
  /** Whether a checkpoint row exists for run.turn. */
  checkpointed: boolean;
  /** The model intent of run.turn, written by the previous turn's commit (null: not written). */
  prewritten: CallRecord | null;
  /** The case's ledger head as this activation last appended it (null: unknown). */
  ledgerHead: LedgerHead | null;
  /** Turns committed in this activation. */
  turns: number;
}

export interface TurnTiming extends ToolTiming {
  modelMs: number;
  toolMs: number;
}

/** What every turn of this process shares. */
export interface TurnEnv {
  readonly store: Store;
  /** Group commit of the hot-path turn writes (one statement for many tasks). */
  readonly committer: JournalCommitter;
  readonly catalog: Catalog;
  readonly crash: CrashPoints;
  readonly metrics: TurnMetrics;
  readonly clock: KernelClock;
  /** Running turns' timing sinks, by task id (tools report into them). */
  readonly timings: Map<string, TurnTiming>;
  /** EVERDICT_MODEL_LOG: one JSON line per real model call (tests count asks per turn). */
  readonly modelLog: string | null;
  readonly logger: Logger;
  /** Last health this process reported per route (a report is written only on a change). */
  readonly routeHealth: Map<string, boolean>;
}

export type TurnEnd = { readonly ended: false } | { readonly ended: true; readonly outcome: 'completed' | 'failed' | 'parked' | 'released' | 'cancelled' };

function timing(): TurnTiming {
  const t: TurnTiming = {
    modelMs: 0,
    toolMs: 0,
    addToolMs(ms) {
      t.toolMs += ms;
    },
  };
  return t;
}

/** The route's client, timed, and logging every real ask when EVERDICT_MODEL_LOG is set. */
function instrumented(inner: ModelClient, t: TurnTiming, log: string | null, key: { taskId: string; turn: number }): ModelClient {
  return {
    route: inner.route,
    async complete(req, opts) {
      if (log) appendFileSync(log, `${JSON.stringify({ taskId: key.taskId, turn: key.turn, route: inner.route.name, pid: process.pid, at: Date.now() })}\n`);
      const started = performance.now();
      try {
        return await inner.complete(req, opts);
      } finally {
        t.modelMs += performance.now() - started;
      }
    },
  };
}

/** Runs one turn and commits it. Throws StaleFence if the lease was lost. */
export async function durableTurn(env: TurnEnv, tr: TaskRun, opts: { signal: AbortSignal; release: boolean }): Promise<TurnEnd> {
  const started = performance.now();
  let commits = 0;
  const onCommit = () => void commits++;
  const turnNo = tr.run.turn;
  const taskId = tr.task.id;
  const notes = tr.notes;
  const stored = tr.stored;
  const prewritten = tr.prewritten;
  tr.notes = [];
  tr.stored = new Map();
  tr.prewritten = null;

  let run = tr.run;
  let host = tr.host;
  const text = notesMessage(notes);
  if (text !== null) {
    run = { ...run, messages: [...run.messages, { role: 'user', content: text }] };
    host = { ...host, decisions: [...host.decisions, ...notes.map((n) => noteDecision(n, turnNo)).filter((d) => d !== null)] };
  }

  const t = timing();
  env.timings.set(taskId, t);
  const journal = new TurnJournal({
    store: env.store,
    committer: env.committer,
    token: tr.token,
    caseId: tr.task.case_id,
    turn: turnNo,
    versions: tr.view.versions,
    route: tr.view.model.route.name,
    registry: tr.view.registry,
    stored,
    prewritten,
    notesToPin: notes.map((n) => n.seq),
    crash: env.crash,
    onCommit,
  });
  const buffer = new TurnBuffer();
  const proposing: ProposalTurn = {
    caseId: tr.task.case_id,
    envelope: tr.runCtx.envelope,
    profileName: tr.view.profileName,
    plan: run.plan ? { revision: run.plan.revision, stepIds: run.plan.steps.map((s) => s.id) } : null,
    proposal: null,
    ledger: [],
  };
  env.catalog.proposals.set(taskId, proposing);
  const deps: KernelDeps = {
    model: instrumented(tr.view.model, t, env.modelLog, { taskId, turn: turnNo }),
    journal,
    tools: tr.view.registry,
    results: paperResultStore(env.store.db, tr.task.case_id, buffer),
    clock: env.clock,
    subAgents: deferredSubAgents(buffer),
    handoff: committedHandoff(buffer),
    // K3: the hook fires for writes. The only write an agent has is a proposal, which executes
    // nothing — the human's authority is the gate's grant — so proposals are allowed and any
    // other write is refused.
    permission: {
      async request(req) {
        return req.tool === PROPOSE_TOOL ? { decision: 'allow' } : { decision: 'deny', reason: 'writes go through writes__propose and a gate' };
      },
    },
  };

  let result: TurnResult;
  try {
    result = await runTurn(deps, tr.runCtx, run, { signal: opts.signal });
  } catch (err) {
    if (isEverdictError(err) && err.code === 'journal_request_mismatch') {
      // The journal answered this turn for a different request (the agent changed mid-turn):
      // the recorded response stands and nobody guesses — an operator decides.
      await parkWithoutTurn(env, tr, 'capability_gap', { kind: 'journal_request_mismatch', turn: turnNo });
      return { ended: true, outcome: 'parked' };
    }
    throw err;
  } finally {
    env.timings.delete(taskId);
    env.catalog.proposals.delete(taskId);
  }
  if (journal.ranTools) env.crash.reach('after_tool_results', { taskId, turn: turnNo });

  const committed = await commitTurn(env, tr, { result, journal, buffer, proposing, host, before: run, restored: { run: tr.run, host: tr.host }, release: opts.release, onCommit });
  env.crash.reach('after_commit', { taskId, turn: turnNo });
  await noteRouteHealth(env, tr, result);

  const wallMs = performance.now() - started;
  env.metrics.turn(committed.end.ended ? committed.end.outcome : 'continued', wallMs / 1000, Math.max(0, wallMs - t.modelMs - t.toolMs) / 1000, commits);
  tr.turns++;
  return committed.end;
}

interface Produced {
  readonly result: TurnResult;
  readonly journal: TurnJournal;
  readonly buffer: TurnBuffer;
  /** What `writes__propose` decided this turn (a gate to ask or wait on; ledger records). */
  readonly proposing: ProposalTurn;
  readonly host: HostState;
  readonly before: RunState;
  /** The state as restored, before this turn's notes were appended. */
  readonly restored: { readonly run: RunState; readonly host: HostState };
  readonly release: boolean;
  readonly onCommit: () => void;
}

/**
 * The model intent of the NEXT turn, when the activation goes on with it: written by this
 * turn's commit (C1 of the next turn folded into C3 of this one). It is the exact request the
 * kernel will build from the committed state — same system prompt, messages, tool schemas and
 * route — and the kernel finds it in the journal before it calls the model. Should the next
 * request differ after all, the unanswered intent is superseded before the call (turnJournal).
 */
function nextIntent(tr: TaskRun, next: RunState): { row: IntentRow; record: CallRecord } | null {
  if (next.settlement !== null || budgetExhausted(tr.runCtx.envelope.budget, next.usage).exhausted) return null;
  const request = modelRequestFor({ tools: tr.view.registry }, tr.runCtx, next);
  const requestDoc = { route: tr.view.model.route, request };
  const canonical = canonicalRequestDoc(tr.view.model.route, request, canonicalTools(tr.view.registry, request.tools));
  const row = modelIntentRow(
    { taskId: tr.task.id, turn: next.turn, ordinal: 0, callId: newId(), kind: 'model', name: tr.view.model.route.name, request: requestDoc, requestHash: '' },
    tr.view.model.route.name,
    tr.view.versions,
    canonical,
  );
  const record: CallRecord = {
    taskId: tr.task.id,
    turn: next.turn,
    ordinal: 0,
    callId: row.call.id,
    kind: 'model',
    name: tr.view.model.route.name,
    request: requestDoc,
    requestHash: row.request.contentHash,
    status: 'intent',
    response: null,
    responseHash: null,
  };
  return { row, record };
}

/** The lease release (and its message) a simple transition writes with the turn; null for continue. */
function leaseRelease(tr: TaskRun, t: Transition): { transition: TransitionWrite; outbox: OutboxWrite[] } | null {
  const { task } = tr;
  switch (t.kind) {
    case 'finish':
      return {
        transition: { state: t.state, parkReason: null, parkDetail: null, wakeAfterMs: null },
        outbox: [
          outboxRow(
            'task.finished',
            { taskId: task.id, parentTaskId: task.parent_id, outcome: t.state, ...(t.summary ? { summary: t.summary } : {}), ...(t.failureCode ? { failureCode: t.failureCode.replace(/[^a-z0-9_]/g, '_') } : {}) },
            { caseId: task.case_id, from: task },
          ),
        ],
      };
    case 'release':
      return { transition: { state: 'open', parkReason: null, parkDetail: null, wakeAfterMs: null }, outbox: [outboxRow('task.runnable', { taskId: task.id, reason: 'retry' }, { caseId: task.case_id, from: task })] };
    case 'park':
      return { transition: { state: 'parked', parkReason: t.reason, parkDetail: t.detail, wakeAfterMs: t.backoffMs }, outbox: [] };
    default:
      return null;
  }
}

const transitionLabel = (t: Transition) => (t.kind === 'park' ? `park:${t.reason}` : t.kind === 'finish' ? `finish:${t.state}` : t.kind);

/**
 * C3: everything the turn produced, the checkpoint, the transition and the outbox, as one unit.
 * A turn that simply goes on (no children, plan, compaction or transition) commits as ONE fenced
 * statement (journal outcomes, state paper, checkpoint, the next turn's model intent and the
 * turn's ledger record); anything else commits as a unit of work.
 */
async function commitTurn(env: TurnEnv, tr: TaskRun, p: Produced): Promise<{ end: TurnEnd }> {
  const { result, journal, buffer } = p;
  const { token, task } = tr;
  const caseId = task.case_id;
  const consumed = result.state.turn > p.before.turn;
  const model = journal.modelRecord();
  const unknownCalls = journal.all().filter((r) => r.status === 'unknown').map((r) => r.callId);
  // A halt before any turn ran (budget, provider down) publishes the state as restored: the
  // notes it was woken with stay unpinned and are carried by the turn that really runs.
  let host: HostState = consumed ? { ...p.host, contextHash: model?.requestHash || p.host.contextHash, pending: { ...p.host.pending, calls: unknownCalls } } : p.restored.host;
  let next: RunState = consumed ? result.state : { ...p.restored.run, settlement: result.state.settlement };
  const planChanged = next.plan !== null && next.plan.revision !== p.before.plan?.revision;
  const compacting = consumed && needsCompaction(next, tr.view.profile.compaction);
  const writeCheckpoint = consumed || (buffer.handoffRequested && !tr.checkpointed);

  const decide = (cancelRequested: 'hard' | 'soft' | null, unreported: number) =>
    waitOnProposal(
      settle({
      settlement: result.settlement,
      cancelRequested,
      release: p.release,
      unreportedChildren: unreported,
      route: tr.view.model.route.name,
      providerAttempt: nextProviderAttempt(task.park_reason, task.park_detail),
      backoffMs: (n) => providerBackoffMs(env.catalog.settings, n),
      }),
      p.proposing.proposal,
    );

  /** The journal/checkpoint/ledger write of this turn, given the transition it is committed with. */
  const turnWrite = (transition: Transition) => {
    const intent = transition.kind === 'continue' ? nextIntent(tr, next) : null;
    const state = writeCheckpoint ? statePaper(stateDocument(caseId, host, next)) : null;
    const outcomes = journal.pendingOutcomes();
    return {
      intent,
      write: {
        papers: [...outcomes.map((o) => o.response), ...buffer.papers, ...(state ? [state] : []), ...(intent ? [intent.row.request] : [])],
        completions: outcomes.map((o) => o.done),
        intents: intent ? [intent.row.call] : [],
        checkpoint: state ? { turn: next.turn, statePaperId: state.id, stateHash: state.contentHash, contextHash: host.contextHash, versions: tr.view.versions } : null,
        ledger: {
          kind: 'turn',
          body: {
            taskId: task.id,
            turn: p.before.turn,
            epoch: token.epoch,
            route: model ? tr.view.model.route.name : null,
            requestHash: model?.requestHash ?? null,
            responseHash: model?.responseHash ?? null,
            stateHash: state?.contentHash ?? null,
            checkpointTurn: state ? next.turn : null,
            versions: versionsHash(tr.view.versions),
            calls: journal.all().map((r) => ({ ordinal: r.ordinal, callId: r.callId, name: r.name, status: r.status })),
            children: buffer.children.map((c) => c.childTaskId),
            plan: planChanged && next.plan ? next.plan.revision : null,
            transition: transitionLabel(transition),
          },
        },
      },
    };
  };

  let transition = decide(null, 0);
  let prewritten: CallRecord | null;
  let resumeSeq: number | null = null;
  const simple = transition.kind === 'continue' || transition.kind === 'finish' || transition.kind === 'release' || (transition.kind === 'park' && !transition.ask);

  const proposed = p.proposing.proposal !== null || p.proposing.ledger.length > 0;
  if (simple && buffer.children.length === 0 && !planChanged && !compacting && !proposed) {
    // The hot path: the turn (and a transition that ends the activation) as part of one
    // group-commit statement, with its outbox row.
    const { intent, write } = turnWrite(transition);
    const release = leaseRelease(tr, transition);
    const done = await env.committer.write(token, caseId, { ...write, transition: release?.transition ?? null, outbox: release?.outbox ?? [] }, tr.ledgerHead);
    tr.ledgerHead = done.head;
    prewritten = intent?.record ?? null;
    if (transition.kind === 'continue' && done.cancelRequested === 'soft') {
      // A soft cancel stops the task at this checkpoint (the written next intent stays unanswered).
      transition = decide('soft', 0);
      prewritten = null;
      const parked = transition;
      await env.store.unitOfWork(async (uow) => {
        await applyTransition(env, uow, tr, parked, next);
        await uow.appendLedger(caseId, { kind: 'task_parked', body: { taskId: task.id, epoch: token.epoch, transition: transitionLabel(parked) } });
      });
      tr.ledgerHead = null;
    }
  } else {
    const outcome = await env.store.unitOfWork(async (uow) => {
      if (compacting) {
        const compacted = await compact(uow, tr, next, host);
        next = compacted.run;
        host = compacted.host;
      }
      // Children placed by this very commit count as unreported: they are created below. The
      // task row is locked first, so a child's report either committed before the count (and is
      // counted as arrived) or waits for this commit and then finds the task parked and wakes it.
      let unreported = 0;
      if (result.settlement?.kind === 'suspended' && result.settlement.parkReason === 'children') {
        await uow.requireFence(token, 'park_children');
        unreported = (await unreportedChildren(uow, task.id)) + buffer.children.length;
      }
      let tx = decide(null, unreported);
      const { intent, write } = turnWrite(tx);
      const done = await writeTurn(uow, token, caseId, write);
      let extraLedger = false;
      // A soft cancel noticed under the fence lock stops the task at this checkpoint.
      const final = decide(done.cancelRequested, unreported);
      if (transitionLabel(final) !== transitionLabel(tx)) {
        tx = final;
        extraLedger = true;
        await uow.appendLedger(caseId, { kind: 'task_parked', body: { taskId: task.id, epoch: token.epoch, transition: transitionLabel(final) } });
      }
      for (const child of buffer.children) await placeChild(env, uow, tr, child);
      if (planChanged && next.plan) {
        const steps = next.plan.steps.map((s) => ({ stepId: s.id, title: s.title.slice(0, 200), dependsOn: [...new Set(s.dependsOn)] }));
        const planHash = payloadHash({ taskId: task.id, revision: next.plan.revision, steps });
        await recordPlanRevision(uow, token, { revision: next.plan.revision, planHash, steps, rowVersion: done.rowVersion });
        if (task.parent_id !== null) {
          // Only the root asks a human; a child's plan goes to its immediate parent (§11.3).
          await send(
            uow,
            'plan.submitted',
            { taskId: task.id, parentTaskId: task.parent_id, revision: next.plan.revision, expectedRevision: next.plan.revision - 1, rowVersion: done.rowVersion, planHash, steps, ...(next.plan.note ? { summary: next.plan.note.slice(0, 4000) } : {}) },
            { caseId, from: task, fence: token },
          );
        }
      }
      if (proposed) {
        extraLedger = true;
        await writeProposal(uow, tr, p.proposing);
      }
      const questionId = await applyTransition(env, uow, tr, tx, next);
      if (questionId !== null) {
        extraLedger = true;
        await uow.appendLedger(caseId, { kind: 'question_asked', body: { taskId: task.id, questionId, askedBy: tr.rootTaskId } });
      }
      const seq = tx.kind === 'resume_now' ? await addNote(uow, task.id, 'info', { text: tx.note }, null) : null;
      return { tx, seq, head: extraLedger ? null : done.head, prewritten: tx.kind === 'continue' ? (intent?.record ?? null) : null };
    });
    transition = outcome.tx;
    resumeSeq = outcome.seq;
    prewritten = outcome.prewritten;
    tr.ledgerHead = outcome.head;
  }
  p.onCommit();

  tr.host = host;
  tr.run = next;
  tr.prewritten = prewritten;
  if (writeCheckpoint) tr.checkpointed = true;
  switch (transition.kind) {
    case 'continue':
      return { end: { ended: false } };
    case 'resume_now':
      tr.run = resumeRun(next);
      if (resumeSeq !== null) tr.notes = [{ seq: resumeSeq, kind: 'info', body: { text: transition.note }, consumed_turn: null }];
      return { end: { ended: false } };
    case 'release':
      return { end: { ended: true, outcome: 'released' } };
    case 'park':
      return { end: { ended: true, outcome: 'parked' } };
    case 'finish':
      return { end: { ended: true, outcome: transition.state === 'done' ? 'completed' : transition.state === 'failed' ? 'failed' : 'cancelled' } };
  }
}

/**
 * A turn that proposed a write waits on it: instead of going on (or being given back), the task
 * parks `gate` on the gate it asked for, the gate of the same change already asked, or the
 * outcome being reconciled. Endings the kernel decided (done, failed, budget, question, a soft
 * cancel) stand; the proposal is still written and its decision reaches the task as a note.
 */
export function waitOnProposal(t: Transition, proposal: ProposalRecord | null): Transition {
  if (proposal === null || (t.kind !== 'continue' && t.kind !== 'release' && t.kind !== 'resume_now')) return t;
  const detail =
    proposal.kind === 'reconciling'
      ? { kind: 'effect_reconciling', effectCallId: proposal.effectCallId, mutationKey: proposal.mutationKey }
      : proposal.kind === 'gate'
        ? { kind: 'effect', gateId: proposal.gateId, packetDigest: proposal.packet.digest, proposeCallId: proposal.callId, mutationKey: proposal.mutationKey }
        : { kind: 'effect', gateId: proposal.gateId, packetDigest: proposal.packetDigest, mutationKey: proposal.mutationKey };
  return { kind: 'park', reason: 'gate', detail, backoffMs: null, ask: false };
}

/**
 * The proposal's durable half, in the turn's unit of work under the task's fence: the exact
 * packet as a paper, the `gate.requested` that names it, and the case's ledger records.
 */
async function writeProposal(uow: UnitOfWork, tr: TaskRun, proposing: ProposalTurn): Promise<void> {
  const { task, token } = tr;
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
      audit: { verdict: proposal.audit.verdict, by: proposal.audit.by, reason: proposal.audit.reason },
    },
  });
}

/** Creates a child task under the parent's fence and makes it runnable (idempotent per spawn call). */
async function placeChild(env: TurnEnv, uow: UnitOfWork, tr: TaskRun, child: TurnBuffer['children'][number]): Promise<void> {
  const task = tr.task;
  const childProfile = env.catalog.childProfileOf(task.profile);
  const profile = env.catalog.profile(childProfile);
  // A root holds its case type's initial grants; a case type no longer configured grants nothing.
  const rootGrants = task.parent_id === null ? (env.catalog.loaded.config.caseTypes[(await caseTypeOf(uow, task.case_id)) ?? '']?.initialGrants ?? []) : [];
  const narrowed = narrowForChild(task.id, heldAuthority(task, rootGrants), { papers: child.papers, grants: child.grants });
  const created = await createChildTask(uow, tr.token, {
    id: child.childTaskId,
    caseId: task.case_id,
    parentId: task.id,
    rootTaskId: tr.rootTaskId,
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
  await sendRunnable(uow, { id: child.childTaskId, case_id: task.case_id }, 'opened', task, tr.token);
  await uow.appendLedger(task.case_id, {
    kind: 'child_placed',
    body: { taskId: task.id, childTaskId: child.childTaskId, tools: child.toolNames, permittedPapers: narrowed.context.permittedPapers, grants: narrowed.context.grants, withheld: narrowed.withheld },
  });
}

/** Replaces the earlier messages by a derived summary paper, if the summary keeps everything. */
async function compact(uow: UnitOfWork, tr: TaskRun, run: RunState, host: HostState): Promise<{ run: RunState; host: HostState }> {
  const limit = tr.view.profile.compaction!;
  const cut = cutIndex(run.messages, limit.keepRecent ?? Math.max(2, Math.floor(limit.maxMessages / 2)));
  if (cut <= 1) return { run, host };
  const summary = buildSummary(run, host, run.messages.slice(0, cut));
  if (summaryMisses(summary, run, host).length > 0) return { run, host }; // keep the previous summary
  const paper = await uow.putPaper({ caseId: tr.task.case_id, kind: 'derived', name: `tasks/${tr.task.id}/summary`, schemaId: SUMMARY_SCHEMA, bytes: summaryBytes(summary) });
  return {
    run: { ...run, messages: [summaryMessage(summary, paper), ...run.messages.slice(cut)] },
    host: { ...host, summary: { paperId: paper.paperId, revision: paper.revision, turn: run.turn } },
  };
}

/** Performs the transition under the fence; returns the id of a question it asked. */
async function applyTransition(env: TurnEnv, uow: UnitOfWork, tr: TaskRun, tx: Transition, run: RunState): Promise<string | null> {
  const { token, task } = tr;
  switch (tx.kind) {
    case 'continue':
    case 'resume_now':
      return null;
    case 'release':
      await uow.transitionTask(token, { state: 'open' });
      await sendRunnable(uow, task, 'retry', task, token);
      return null;
    case 'finish':
      await uow.transitionTask(token, { state: tx.state });
      await send(
        uow,
        'task.finished',
        { taskId: task.id, parentTaskId: task.parent_id, outcome: tx.state, ...(tx.summary ? { summary: tx.summary } : {}), ...(tx.failureCode ? { failureCode: tx.failureCode.replace(/[^a-z0-9_]/g, '_') } : {}) },
        { caseId: task.case_id, from: task, fence: token },
      );
      return null;
    case 'park': {
      let questionId: string | null = null;
      let detail: Record<string, unknown> = { ...tx.detail };
      if (tx.ask) {
        // Only the root asks a human; a sub-agent asks its parent, and a parent answers its
        // sub-agents' questions with the same park (questions.ts, §11.3).
        const asked = await questionProtocol(uow, { task, token, rootTaskId: tr.rootTaskId }, tx.reason, run.wait);
        questionId = asked.humanQuestionId;
        detail = { ...detail, ...asked.detail };
      }
      if (tx.backoffMs !== null) await parkWithBackoff(uow, token, tx.reason, detail, tx.backoffMs);
      else await uow.transitionTask(token, { state: 'parked', parkReason: tx.reason, parkDetail: detail });
      return questionId;
    }
  }
}

/** Parks the held task without running a turn (restore failure, version decision, mismatch). */
export async function parkWithoutTurn(env: TurnEnv, tr: { task: GraphTaskRow; token: FenceToken }, reason: 'capability_gap' | 'question', detail: Record<string, unknown>, before?: (uow: UnitOfWork) => Promise<void>): Promise<void> {
  await env.store.unitOfWork(async (uow) => {
    await uow.requireFence(tr.token, 'park_task');
    await before?.(uow);
    await uow.transitionTask(tr.token, { state: 'parked', parkReason: reason, parkDetail: detail });
    await uow.appendLedger(tr.task.case_id, { kind: 'task_parked', body: { taskId: tr.task.id, epoch: tr.token.epoch, reason, detail } });
  });
}

/** The provider health signal: written only when this process sees a route change state. */
async function noteRouteHealth(env: TurnEnv, tr: TaskRun, result: TurnResult): Promise<void> {
  const route = tr.view.model.route.name;
  let ok: boolean | null = null;
  for (const e of result.events) {
    if (e.type === 'model_call' && !e.replayed) ok = true;
    if (e.type === 'model_error' && (e.kind === 'provider_down' || e.kind === 'retryable')) ok = false;
  }
  if (ok === null || env.routeHealth.get(route) === ok) return;
  env.routeHealth.set(route, ok);
  await reportRouteHealth(env.store.db, route, ok).catch((err: unknown) => env.logger.warn({ route, err: String(err) }, 'route health not recorded'));
}

/** A fresh EverdictError for a task whose state says it cannot run (defensive). */
export function notRunnable(taskId: string, why: string): EverdictError {
  return new EverdictError('task_not_runnable', `task ${taskId} cannot run: ${why}`, { details: { taskId } });
}
