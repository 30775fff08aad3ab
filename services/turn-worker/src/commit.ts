/**
 * C3 executed: a turn's write (turnWrite.ts) made durable, and the parks that need no turn.
 *
 *   the turn alone        the write as one part of a group-commit statement (libs/store
 *                         groupCommit.ts): journal, checkpoint, next intent, ledger record, lease
 *                         and outbox under the task's own fence — for a continue or release
 *                         (which never change the case state) with no transaction of its own, for
 *                         a finish in a unit of work shared with other finishes that re-derives
 *                         each one's case state after the statement;
 *   the turn + placements a unit of work: hold the fence (reading a pending cancel and the row
 *                         version under it), compact, count the children still to report, decide,
 *                         place (children, plan, proposal, consent gates, questions, resume
 *                         note), then execute the write — last, since it may give the fence up;
 *   a park alone          a unit of work (also to stop a turn already written at its checkpoint:
 *                         a soft cancel the group-commit statement reported).
 * A park or finish re-derives the case state (libs/store caseState) in its unit of work.
 * Every path executes the value `turnWrite` built; none writes a transition of its own.
 */
import { resumeRun } from '@everdict/agent-runtime';
import type { RunState, TurnResult } from '@everdict/agent-runtime';
import { fleetStopInForce, unreportedChildren, writeTurnMovingCase } from '@everdict/store';
import type { CaseStateCause, FenceToken, LedgerHead, Store, TaskRow, TurnWrite, UnitOfWork } from '@everdict/store';
import { compactionLimit, needsCompaction } from './compaction.js';
import { nextBackoffAttempt, settle } from './decisions.js';
import type { Transition } from './decisions.js';
import { placeConsents, waitOnConsent } from './consent.js';
import type { ConsentAsk } from './consent.js';
import { asFleetPark } from './fleetStop.js';
import { compact, placeChild, placePlan, placeProposal, placeQuestions, placeResumeNote } from './placement.js';
import type { Placer } from './placement.js';
import { providerBackoffMs } from './settings.js';
import type { HostState } from './statePaper.js';
import type { TaskRun, TurnEnd, TurnEnv } from './turn.js';
import type { TurnBuffer } from './turnBuffer.js';
import type { TurnJournal } from './turnJournal.js';
import { turnWrite, waitOnProposal } from './turnWrite.js';
import type { AloneTransition, ParkTransition, TurnCommit, TurnProduct } from './turnWrite.js';
import type { ProposalTurn } from './writesPropose.js';

/** What a turn's run left for its commit. */
export interface Produced {
  readonly result: TurnResult;
  readonly journal: TurnJournal;
  readonly buffer: TurnBuffer;
  /** What `writes__propose` decided this turn (a gate to ask or wait on; ledger records). */
  readonly proposing: ProposalTurn;
  /** The consent gates this turn's calls asked for (the task parks on the first). */
  readonly consents: readonly ConsentAsk[];
  readonly host: HostState;
  readonly before: RunState;
  /** The state as restored, before this turn's notes were appended. */
  readonly restored: { readonly run: RunState; readonly host: HostState };
  readonly release: boolean;
  readonly onCommit: () => void;
}

const isPark = (t: Transition): t is ParkTransition => t.kind === 'park';

/** A park or a finish can change the case state (§11.1); a continue or a release cannot (the task stays active). */
const movesCase = (t: Transition): boolean => t.kind === 'park' || t.kind === 'finish';

/** What a transition that may change the case state tells its refresh; null for one that cannot. */
function caseCause(t: Transition, taskId: string): CaseStateCause | null {
  if (!movesCase(t)) return null;
  return { cause: t.kind === 'finish' ? `task_${t.state}` : `task_parked:${t.kind === 'park' ? t.reason : ''}`, taskId };
}

/**
 * The kind of a case-moving write, as the group committer learns what each kind derives
 * (JournalCommitter's expectations): its cause, and whether the task is its case's root — a
 * root's finish decides the case, a child's leaves it to its parent.
 */
const expectKey = (cause: CaseStateCause, task: TaskRow): string => `${cause.cause}:${task.parent_id === null ? 'root' : 'child'}`;

/**
 * Executes the write, then re-derives the case state in the same unit of work when the
 * transition may change it; returns the ledger head after both (the `case_state` record, if one
 * was appended, is the newest).
 */
async function writeMovingCase(uow: UnitOfWork, token: FenceToken, task: TaskRow, write: TurnWrite, t: Transition): Promise<{ head: LedgerHead | null }> {
  return { head: (await writeTurnMovingCase(uow, token, task.case_id, write, caseCause(t, task.id))).head };
}

/** The provider's last Retry-After this turn (the floor of a provider_down park's backoff). */
function retryAfterFloorMs(result: TurnResult): number | null {
  let floor: number | null = null;
  for (const e of result.events) if (e.type === 'model_error' && e.retryAfterMs !== undefined) floor = e.retryAfterMs;
  return floor;
}

/** Commits the turn and moves the task run on to what it committed. */
export async function commitTurn(env: TurnEnv, tr: TaskRun, p: Produced): Promise<TurnEnd> {
  const { result, journal, buffer } = p;
  const { token, task } = tr;
  const caseId = task.case_id;
  const consumed = result.state.turn > p.before.turn;
  const unknownCalls = journal.all().filter((r) => r.status === 'unknown').map((r) => r.callId);
  // A halt before any turn ran (budget, provider down) publishes the state as restored: the
  // notes it was woken with stay unpinned and are carried by the turn that really runs.
  const host: HostState = consumed ? { ...p.host, contextHash: journal.modelRecord()?.requestHash || p.host.contextHash, pending: { ...p.host.pending, calls: unknownCalls } } : p.restored.host;
  const next: RunState = consumed ? result.state : { ...p.restored.run, settlement: result.state.settlement };
  const plan = next.plan !== null && next.plan.revision !== p.before.plan?.revision ? next.plan : null;
  const limit = compactionLimit(tr.view.profile.compaction, env.catalog.loaded.config.routes[tr.view.profile.route]);
  const compacting = consumed && needsCompaction(next, limit);
  const checkpoint = consumed || (buffer.handoffRequested && !tr.checkpointed);
  const proposed = p.proposing.proposal !== null || p.proposing.ledger.length > 0;

  const decide = (cancelRequested: 'hard' | 'soft' | null, unreported: number) =>
    waitOnConsent(
      waitOnProposal(
        settle({
          settlement: result.settlement,
          cancelRequested,
          release: p.release,
          unreportedChildren: unreported,
          route: tr.view.model.route.name,
          backoffAttempt: nextBackoffAttempt(task.park_reason, task.park_detail),
          backoffMs: (n) => providerBackoffMs(env.catalog.settings, n, retryAfterFloorMs(result)),
        }),
        p.proposing.proposal,
      ),
      p.consents,
    );
  const product = (state: { readonly run: RunState; readonly host: HostState }): TurnProduct => ({
    turn: p.before.turn,
    next: state.run,
    host: state.host,
    checkpoint,
    outcomes: journal.pendingOutcomes(),
    calls: journal.all(),
    results: buffer.papers,
    children: buffer.children.map((c) => c.childTaskId),
    planRevision: plan?.revision ?? null,
    agent: { registry: tr.view.registry, runCtx: tr.runCtx, route: tr.view.model.route, versions: tr.view.versions },
  });
  const subject = { task, epoch: token.epoch };

  let commit: TurnCommit;
  /** The state the write checkpointed (compaction may have shortened the conversation). */
  let committed = { run: next, host };
  let resumeSeq: number | null = null;
  const first = decide(null, 0);
  // A park takes the unit of work below (its children count and questions are decided under the
  // task lock); a finish needs no placement, and its case state is written with it by the group
  // commit.
  const placing = buffer.children.length > 0 || plan !== null || compacting || proposed || first.kind === 'resume_now' || first.kind === 'park' || p.consents.length > 0;
  if (!placing) {
    // The hot path: the turn, and a continue, release or finish, as one part of a group-commit
    // statement; a finish's part is committed with its case state (caseCause).
    commit = turnWrite({ subject, transition: first, product: product({ run: next, host }) });
    const cause = caseCause(first, task.id);
    const done = await env.committer.write(token, caseId, commit.write, tr.ledgerHead, cause === null ? {} : { caseCause: cause, expectKey: expectKey(cause, task) });
    tr.ledgerHead = done.head;
    const stop = commit.transition.kind === 'continue' && done.cancelRequested === 'soft' ? decide('soft', 0) : null;
    if (stop !== null && isPark(stop)) {
      // A soft cancel stops the task at the checkpoint just written; the next intent it carries
      // stays unanswered.
      const c = turnWrite({ subject, transition: stop, product: null });
      commit = c;
      tr.ledgerHead = (await env.store.unitOfWork((uow) => writeMovingCase(uow, token, task, c.write, c.transition))).head;
    } else if (commit.transition.kind === 'continue' && (await env.fleetStop.softInForce())) {
      // A fleet soft stop: the same park, written only while the stop row (held FOR SHARE) says
      // the stop still holds — a resume committed first finds nothing to wake, so none is left.
      const park = asFleetPark(decide('soft', 0));
      if (isPark(park)) {
        const parked = await env.store.unitOfWork(async (uow) => {
          if ((await fleetStopInForce(uow, 'soft')) === null) return null;
          const c = turnWrite({ subject, transition: park, product: null });
          return { commit: c, head: (await writeMovingCase(uow, token, task, c.write, c.transition)).head };
        });
        if (parked !== null) {
          commit = parked.commit;
          tr.ledgerHead = parked.head;
        }
      }
    }
  } else {
    const at: Placer = { task, token, rootTaskId: tr.rootTaskId };
    // The fleet-stop hint may read through the pool: never while the unit of work below holds a
    // connection (turns that each hold one and wait for another exhaust the pool for good).
    const softHint = first.kind === 'continue' && (await env.fleetStop.softInForce());
    const placed = await env.store.unitOfWork(async (uow) => {
      const held = await uow.holdFence(token, 'write_journal');
      const state = compacting ? await compact(uow, at, limit, next, host) : { run: next, host };
      // Children placed by this very commit count as unreported: they are created below. The
      // task row is locked, so a child's report either committed before the count (and is counted
      // as arrived) or waits for this commit and then finds the task parked and wakes it.
      const childrenPark = result.settlement?.kind === 'suspended' && result.settlement.parkReason === 'children';
      const unreported = childrenPark ? (await unreportedChildren(uow, task.id)) + buffer.children.length : 0;
      // A fleet soft stop counts as this task's soft cancel (checked under the stop row's lock).
      const fleetSoft = held.cancelRequested === null && softHint && (await fleetStopInForce(uow, 'soft')) !== null;
      let transition = fleetSoft ? asFleetPark(decide('soft', unreported)) : decide(held.cancelRequested, unreported);
      for (const child of buffer.children) await placeChild(env.catalog, uow, at, child);
      if (plan !== null) await placePlan(uow, at, plan, held.rowVersion);
      if (proposed) await placeProposal(uow, at, p.proposing);
      if (p.consents.length > 0) transition = await placeConsents(uow, at, p.consents, transition);
      if (isPark(transition) && transition.ask) transition = await placeQuestions(uow, at, transition, state.run.wait);
      const seq = transition.kind === 'resume_now' ? await placeResumeNote(uow, at, transition.note) : null;
      const c = turnWrite({ subject, transition, product: product(state) });
      const done = await writeMovingCase(uow, token, task, c.write, c.transition);
      return { commit: c, state, seq, head: done.head };
    });
    commit = placed.commit;
    committed = placed.state;
    resumeSeq = placed.seq;
    tr.ledgerHead = placed.head;
  }
  p.onCommit();

  tr.host = committed.host;
  tr.run = committed.run;
  tr.prewritten = commit.prewritten;
  if (checkpoint) tr.checkpointed = true;
  const cp = commit.write.checkpoint ?? null;
  tr.checkpointHash = cp !== null && cp.turn === committed.run.turn ? cp.stateHash : null;
  const t = commit.transition;
  switch (t.kind) {
    case 'continue':
      return { ended: false };
    case 'resume_now':
      tr.run = resumeRun(committed.run);
      if (resumeSeq !== null) tr.notes = [{ seq: resumeSeq, kind: 'info', body: { text: t.note }, consumed_turn: null }];
      return { ended: false };
    case 'release':
      return { ended: true, outcome: 'released' };
    case 'park':
      return { ended: true, outcome: 'parked' };
    case 'finish':
      return { ended: true, outcome: t.state === 'done' ? 'completed' : t.state === 'failed' ? 'failed' : 'cancelled' };
  }
}

/**
 * Writes a transition of the held task without running a turn (the value `turnWrite` builds for
 * it), after `before` placed what goes with it in the same unit of work.
 */
export async function writeWithoutTurn(store: Store, tr: Pick<TaskRun, 'task' | 'token'>, transition: AloneTransition, before?: (uow: UnitOfWork) => Promise<void>): Promise<void> {
  await store.unitOfWork(async (uow) => {
    await uow.requireFence(tr.token, transition.kind === 'park' ? 'park_task' : 'release_task');
    await before?.(uow);
    const c = turnWrite({ subject: { task: tr.task, epoch: tr.token.epoch }, transition, product: null });
    await writeMovingCase(uow, tr.token, tr.task, c.write, c.transition);
  });
}

/** Parks the held task without running a turn (restore failure, version decision, mismatch, runtime fault). */
export async function parkWithoutTurn(
  env: Pick<TurnEnv, 'store'>,
  tr: Pick<TaskRun, 'task' | 'token'>,
  reason: 'capability_gap' | 'question',
  detail: Record<string, unknown>,
  before?: (uow: UnitOfWork) => Promise<void>,
): Promise<void> {
  await writeWithoutTurn(env.store, tr, { kind: 'park', reason, detail, backoffMs: null, ask: false }, before);
}

/**
 * Parks the held task `connector_down` without running a turn (a server its tools come from
 * could not be reached): a backoff timer wakes it, each attempt waiting longer.
 */
export async function parkDownWithoutTurn(env: Pick<TurnEnv, 'store' | 'catalog'>, tr: Pick<TaskRun, 'task' | 'token'>, connector: string, what: string): Promise<void> {
  const attempt = nextBackoffAttempt(tr.task.park_reason, tr.task.park_detail);
  const detail = { cause: 'connector_down', connector, what: what.slice(0, 300), attempt };
  await writeWithoutTurn(env.store, tr, { kind: 'park', reason: 'connector_down', detail, backoffMs: providerBackoffMs(env.catalog.settings, attempt), ask: false });
}

/** Gives the held task back without running a turn: another worker continues it from its checkpoint. */
export async function releaseWithoutTurn(store: Store, tr: Pick<TaskRun, 'task' | 'token'>): Promise<void> {
  await writeWithoutTurn(store, tr, { kind: 'release' });
}
