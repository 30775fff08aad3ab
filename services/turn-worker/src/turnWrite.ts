/**
 * The turn write (C3, seed 004 §2 step 7): everything a turn leaves durable — its call outcomes,
 * offloaded results, state paper and checkpoint, the next turn's model intent, its ledger record,
 * the task's transition and the messages that go with it — as ONE value, built here by ONE pure
 * function (`turnWrite`; no I/O: it allocates ids and stamps envelopes, nothing else). The group
 * commit and a unit of work both execute that value as it is (commit.ts).
 *
 *   transition   lease           outbox                          next intent   ledger
 *   continue     kept            —                               written       turn
 *   resume_now   kept            —                               —             turn
 *   release      open            task.runnable (retry, itself)   —             turn
 *   finish       done|failed|…   task.finished (to the parent)   —             turn
 *   park         parked (+timer) —                               —             turn
 *   park alone   parked (+timer) —                               —             task_parked
 *   release alone open           task.runnable (retry, itself)   —             —
 * A transition "alone" has no turn of its own: a task parked before any turn ran (restore
 * failure, versions, a journal mismatch, a runtime fault) or stopped at the checkpoint a turn
 * already wrote (a soft cancel); a task given back between two turns (a drain) or after a
 * transient fault, to continue from its last checkpoint elsewhere. A park's question and answers (`ask`) are not in the value: they are
 * placed in the unit of work before it, and their ids come in as park detail.
 */
import { budgetExhausted, KERNEL_REFUSAL_CODES, newId } from '@everdict/contracts';
import type { KernelRefusal } from '@everdict/contracts';
import { modelRequestFor } from '@everdict/agent-runtime';
import type { CallRecord, RunContext, RunState, ToolRegistry } from '@everdict/agent-runtime';
import type { RouteIdentity } from '@everdict/llm';
import type { NewPaper, OutboxWrite, TransitionWrite, TurnWrite } from '@everdict/store';
import type { Transition } from './decisions.js';
import { outboxRow } from './envelopes.js';
import type { TaskIdentity } from './envelopes.js';
import { stateDocument, statePaper } from './statePaper.js';
import type { HostState } from './statePaper.js';
import { modelIntentRow, modelRequestDocument, outcomeRows } from './turnJournal.js';
import type { PendingOutcome } from './turnJournal.js';
import type { ProposalRecord } from './writesPropose.js';
import { versionsHash } from './versions.js';
import type { Versions } from './versions.js';

export type ParkTransition = Extract<Transition, { kind: 'park' }>;
/** What a write without a turn of its own can do to the task. */
export type AloneTransition = ParkTransition | Extract<Transition, { kind: 'release' }>;

/** The task a write is for, under the fence epoch it writes with. */
export interface WriteSubject {
  readonly task: TaskIdentity;
  readonly epoch: number;
}

/** What the next turn's model request is built from (the agent as this activation runs it). */
export interface AgentRequestSource {
  readonly registry: ToolRegistry;
  readonly runCtx: RunContext;
  readonly route: RouteIdentity;
  readonly versions: Versions;
}

/** What a turn produced, as its write carries it. */
export interface TurnProduct {
  /** The turn that ran. */
  readonly turn: number;
  /** The state the checkpoint restores (the next turn's, or the settled one). */
  readonly next: RunState;
  readonly host: HostState;
  /** Whether this write checkpoints `next` (a state paper and a checkpoint row). */
  readonly checkpoint: boolean;
  /** Call outcomes not yet durable (response papers + completions). */
  readonly outcomes: readonly PendingOutcome[];
  /** Every call of the turn, in ordinal order (the ledger names them). */
  readonly calls: readonly CallRecord[];
  /** Offloaded tool results (K6). */
  readonly results: readonly NewPaper[];
  /** Children placed with this turn (their rows are placed before the write). */
  readonly children: readonly string[];
  /** The plan revision recorded with this turn (null: the plan did not change). */
  readonly planRevision: number | null;
  readonly agent: AgentRequestSource;
}

export type TurnWriteInput =
  | { readonly subject: WriteSubject; readonly transition: Transition; readonly product: TurnProduct }
  | { readonly subject: WriteSubject; readonly transition: AloneTransition; readonly product: null };

export interface TurnCommit {
  /** Executed as it is: by the group commit, or by a unit of work after the turn's placements. */
  readonly write: TurnWrite;
  readonly transition: Transition;
  /** The next turn's model intent this write carries (null: none — the activation ends or resumes). */
  readonly prewritten: CallRecord | null;
}

/** The transition's name in the ledger (`park:question`, `finish:done`, `continue`, …). */
export const transitionLabel = (t: Transition) => (t.kind === 'park' ? `park:${t.reason}` : t.kind === 'finish' ? `finish:${t.state}` : t.kind);

/** A failure code as the wire takes it (`^[a-z][a-z0-9_]*$`). */
const wireCode = (code: string) => {
  const c = code.toLowerCase().replace(/[^a-z0-9_]/g, '_');
  return /^[a-z]/.test(c) ? c : `code_${c}`;
};

/** THE translation of a transition into the lease it gives up and the messages that go with it. */
function leaseRelease(task: TaskIdentity, t: Transition): { transition: TransitionWrite | null; outbox: OutboxWrite[] } {
  switch (t.kind) {
    case 'continue':
    case 'resume_now':
      return { transition: null, outbox: [] };
    case 'release':
      return { transition: { state: 'open', parkReason: null, parkDetail: null, wakeAfterMs: null }, outbox: [outboxRow('task.runnable', { taskId: task.id, reason: 'retry' }, { caseId: task.case_id, from: task })] };
    case 'finish': {
      const failureCode = t.failureCode ? { failureCode: wireCode(t.failureCode) } : {};
      const payload = { taskId: task.id, parentTaskId: task.parent_id, outcome: t.state, ...(t.summary ? { summary: t.summary } : {}), ...failureCode };
      return { transition: { state: t.state, parkReason: null, parkDetail: null, wakeAfterMs: null }, outbox: [outboxRow('task.finished', payload, { caseId: task.case_id, from: task })] };
    }
    case 'park':
      return { transition: { state: 'parked', parkReason: t.reason, parkDetail: t.detail, wakeAfterMs: t.backoffMs }, outbox: [] };
  }
}

/**
 * The model intent of the NEXT turn, when the activation goes on with it: C1 of the next turn
 * folded into this write. It is the exact request the kernel will build from the committed state
 * — same system prompt, messages, tool schemas and route — and the kernel finds it in the journal
 * before it calls the model. Should the next request differ after all, the unanswered intent is
 * superseded before the call (turnJournal). None once the run settled or its budget is spent.
 */
export function nextIntent(agent: AgentRequestSource, next: RunState): { row: ReturnType<typeof modelIntentRow>; record: CallRecord } | null {
  if (next.settlement !== null || budgetExhausted(agent.runCtx.envelope.budget, next.usage).exhausted) return null;
  const request = modelRequestFor({ tools: agent.registry }, agent.runCtx, next);
  const requestDoc = { route: agent.route, request };
  const intent = { taskId: next.taskId, turn: next.turn, ordinal: 0, callId: newId(), kind: 'model' as const, name: agent.route.name, request: requestDoc, requestHash: '' };
  const row = modelIntentRow(intent, agent.route.name, agent.versions, modelRequestDocument(next.taskId, requestDoc, agent.registry));
  return { row, record: { ...intent, requestHash: row.request.contentHash, status: 'intent', response: null, responseHash: null } };
}

/** The kernel refusal a tool call's recorded response carries (null: none, or not a tool call). */
function refusalOf(r: CallRecord): KernelRefusal | null {
  if (r.kind !== 'tool' || r.response === null || typeof r.response !== 'object') return null;
  const code = (r.response as { refusal?: unknown }).refusal;
  return typeof code === 'string' && (KERNEL_REFUSAL_CODES as readonly string[]).includes(code) ? (code as KernelRefusal) : null;
}

/** The turn write: one value for everything the turn (or a transition alone) leaves durable. */
export function turnWrite(input: TurnWriteInput): TurnCommit {
  const { subject, transition } = input;
  const { task, epoch } = subject;
  const release = leaseRelease(task, transition);
  const p = input.product;
  if (p === null) {
    const t = input.transition;
    return {
      write: {
        papers: [],
        completions: [],
        intents: [],
        checkpoint: null,
        // A hand-back changes nothing the case's history needs: the next holder's turns say it.
        ledger: t.kind === 'park' ? { recordId: newId(), kind: 'task_parked', body: { taskId: task.id, epoch, transition: transitionLabel(t), reason: t.reason, detail: t.detail } } : null,
        ...release,
      },
      transition,
      prewritten: null,
    };
  }
  const intent = transition.kind === 'continue' ? nextIntent(p.agent, p.next) : null;
  const state = p.checkpoint ? statePaper(stateDocument(task.case_id, p.host, p.next)) : null;
  const model = p.calls.find((c) => c.ordinal === 0);
  const done = outcomeRows(p.outcomes);
  return {
    write: {
      papers: [...done.papers, ...p.results, ...(state ? [state] : []), ...(intent ? [intent.row.request] : [])],
      completions: done.completions,
      intents: [...done.intents, ...(intent ? [intent.row.call] : [])],
      checkpoint: state ? { turn: p.next.turn, statePaperId: state.id, stateHash: state.contentHash, contextHash: p.host.contextHash, versions: p.agent.versions } : null,
      ledger: {
        recordId: newId(),
        kind: 'turn',
        // Keys in canonical order: the record is hashed (canonicalJson writes it in one pass).
        body: {
          // A withheld call is listed with the refusal it was answered with: a call that did
          // nothing still records what was checked.
          calls: p.calls.map((r) => {
            const refusal = refusalOf(r);
            return { callId: r.callId, name: r.name, ordinal: r.ordinal, ...(refusal === null ? {} : { refusal }), status: r.status };
          }),
          checkpointTurn: state ? p.next.turn : null,
          children: [...p.children],
          epoch,
          plan: p.planRevision,
          requestHash: model?.requestHash ?? null,
          responseHash: model?.responseHash ?? null,
          route: model ? p.agent.route.name : null,
          stateHash: state?.contentHash ?? null,
          taskId: task.id,
          transition: transitionLabel(transition),
          turn: p.turn,
          versions: versionsHash(p.agent.versions),
        },
      },
      ...release,
    },
    transition,
    prewritten: intent?.record ?? null,
  };
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
