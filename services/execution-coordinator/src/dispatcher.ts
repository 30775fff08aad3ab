/**
 * The dispatch loop: the §5 sequence for each approved grant, in short units of work around the
 * connector calls — no transaction is ever open while a connector is called.
 *
 *   0. a fleet hard stop (§7) in force: the dispatch stays pending, held — nothing is read or
 *      sent; it is taken again every `fleetStopRecheckMs` and as soon as the stop is lifted
 *   1. reload authority (grant, gate, decisions, pinned packet + digest, task, case hard stop)
 *   2. mutation-key lookup: applied before → the recorded receipt; in doubt → reconcile; never a
 *      second operation for the same change
 *   3. connector preflight: admission (target identity, registered operation, parameters) and
 *      the precondition reads — a refusal here is before any contact with the target
 *   4. ONE unit of work: the fleet hard stop again (its row held FOR SHARE, so a stop that
 *      commits first is seen, and one that commits later waits for this reservation), authority
 *      again with the grant row locked, the journal intent, the grant
 *      reserved for exactly that call, the impact keys claimed in sorted order (a key held by
 *      another call parks this dispatch as a coordination decision instead)
 *   5. execute (crash point before_execute)
 *   6. persist the outcome before anything else (crash point after_execute before it)
 *   7. conclusive: post-check the assertions, release the impact keys, spend the grant, emit
 *      `effect.outcome` (settle); unknown: emit it as unknown and leave it to the reconciler
 *
 * Crash rule: a dispatch whose intent is committed is never executed again by anyone. If its
 * process dies, its claim lapses and the reconciler turns the call `unknown` and asks the
 * connector what landed; only a conclusive "not applied" from a connector that can prove it
 * lets a new attempt (new idempotency key, same grant and call) start here.
 */
import { EverdictError, isEverdictError, jitteredBackoffMs, newId, packetMutationKey } from '@everdict/contracts';
import type { Clock, EffectPacket } from '@everdict/contracts';
import { ConnectorRefused, ConnectorUnavailable, checkAssertions } from '@everdict/connectors';
import type { CheckOutcome, Connector, ConnectorSet, PreflightResult } from '@everdict/connectors';
import {
  DISPATCH_CHANNEL,
  DuplicateKey,
  FLEET_STOP_HELD_KEY,
  RECONCILE_CHANNEL,
  claimDueDispatches,
  claimImpactKeys,
  consumeGrantBy,
  effectIdempotencyKey,
  enqueuePlatformMessage,
  insertEffectIntent,
  fleetStopInForce,
  journalRefusal,
  loadCaseStop,
  loadDecisions,
  loadFleetStops,
  loadDispatchOfCall,
  loadEffectCall,
  loadGate,
  loadGrant,
  loadLandedRecord,
  loadTaskForEffect,
  lookupMutation,
  markGrantExpired,
  moveDispatchTo,
  notifyAtCommit,
  readPacketPaper,
  recordEffectOutcome,
  releaseImpactKeysOf,
  renewDispatches,
  reopenEffectAttempt,
  reserveGrantFor,
  revokeGrantNow,
} from '@everdict/store';
import type { DispatchRow, GateRow, LandedRecord, MutationLookup, Queryable, Store, UnitOfWork } from '@everdict/store';
import { SPAN, withSpan } from '@everdict/tracing';
import type { AuthorityFacts, DispatchRefusal } from './authority.js';
import { checkAuthority } from './authority.js';
import type { CrashPoints } from './crashpoints.js';

export const COORDINATOR_SERVICE = 'execution-coordinator';

/** The dispatch detail key a fleet hard stop's hold sets (cleared by the resume). */
const FLEET_STOP_HELD = FLEET_STOP_HELD_KEY;

export interface Backoff {
  readonly initialMs: number;
  readonly maxMs: number;
}

/** Delay before retry number `n` (0-based): initial · 2^n, capped. Pure. */
export function backoffDelay(n: number, b: Backoff): number {
  return Math.min(b.initialMs * 2 ** Math.min(n, 30), b.maxMs);
}

interface DispatcherLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

interface DispatcherOptions {
  readonly store: Store;
  readonly connectors: ConnectorSet;
  /** The shape version the fleet config declares for a write operation (default "1"). */
  readonly shapeVersionOf?: (connector: string, operation: string) => string;
  /** Claim owner, unique per process. */
  readonly owner: string;
  readonly logger: DispatcherLogger;
  readonly crash: CrashPoints;
  readonly clock: Clock;
  /** Claim lease on the database clock, renewed every third of it (default 30000 ms). */
  readonly leaseMs?: number;
  /** Poll interval when no notification arrives (default 1000 ms). */
  readonly pollMs?: number;
  /** Dispatches worked on at once (default 8). */
  readonly concurrency?: number;
  /** Backoff of a preflight that could not read the target (default 1 s doubling to 60 s). */
  readonly preflightBackoff?: Backoff;
  /** How often a dispatch held by a fleet hard stop is looked at again (default 2000 ms). */
  readonly fleetStopRecheckMs?: number;
  /** Called with every settled or refused dispatch (metrics, tests). */
  readonly onFinished?: (outcome: 'settled' | 'refused' | 'duplicate' | 'coordination' | 'unknown') => void;
}

/** Aborts a unit of work with a result instead of an error (the transaction rolls back). */
class Abort<T> extends Error {
  constructor(readonly result: T) {
    super('unit of work aborted');
  }
}

type Reservation =
  | { kind: 'reserved'; callId: string; attempt: number; idempotencyKey: string }
  | { kind: 'refused'; refusal: DispatchRefusal }
  | { kind: 'coordination'; key: string; holder: { case_id: string; call_id: string | null } | undefined }
  | { kind: 'duplicate' }
  | { kind: 'fleet_stopped'; reason: string }
  | { kind: 'lost' };

interface Loaded {
  readonly facts: AuthorityFacts;
  readonly packet: EffectPacket | undefined;
  /** Content hash of the packet paper revision (the effect call's request hash). */
  readonly packetHash: string | undefined;
  readonly gate: GateRow | undefined;
}

export class Dispatcher {
  private readonly leaseMs: number;
  private readonly pollMs: number;
  private readonly concurrency: number;
  private readonly preflightBackoff: Backoff;
  private readonly inflight = new Map<string, Promise<void>>();
  /** Claims this process holds and renews. */
  private readonly held = new Set<string>();
  private running = false;
  private loopDone: Promise<void> | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private wakeSeq = 0;
  private waiter: (() => void) | undefined;

  constructor(private readonly o: DispatcherOptions) {
    this.leaseMs = o.leaseMs ?? 30_000;
    this.pollMs = o.pollMs ?? 1_000;
    this.concurrency = o.concurrency ?? 8;
    this.preflightBackoff = o.preflightBackoff ?? { initialMs: 1_000, maxMs: 60_000 };
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.unlisten = await this.o.store.db.listen(DISPATCH_CHANNEL, () => this.wake());
    this.heartbeat = setInterval(() => void this.renew(), Math.max(50, Math.floor(this.leaseMs / 3)));
    this.loopDone = this.loop();
  }

  /** Takes no new dispatch; waits for the ones in flight (their connector calls finish and are recorded). */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.wake();
    await this.loopDone;
    await Promise.allSettled([...this.inflight.values()]);
    clearInterval(this.heartbeat);
    await this.unlisten?.().catch(() => undefined);
  }

  /** A dispatch may be due (a committed gate.decided, a released impact key, a retry). */
  wake(): void {
    this.wakeSeq++;
    this.waiter?.();
  }

  private async loop(): Promise<void> {
    while (this.running) {
      const seen = this.wakeSeq;
      let claimed: DispatchRow[] = [];
      const free = this.concurrency - this.inflight.size;
      if (free > 0) {
        try {
          claimed = await claimDueDispatches(this.o.store.db, this.o.owner, ['pending', 'settling'], free, this.leaseMs);
        } catch (err) {
          this.o.logger.error({ err: describe(err) }, 'claiming dispatches failed');
        }
      }
      for (const row of claimed) {
        this.held.add(row.grant_id);
        const work = this.process(row).finally(() => {
          this.held.delete(row.grant_id);
          this.inflight.delete(row.grant_id);
          this.wake();
        });
        this.inflight.set(row.grant_id, work);
      }
      if (claimed.length === 0 || claimed.length === free) await this.idle(seen);
    }
  }

  private idle(seen: number): Promise<void> {
    if (this.wakeSeq !== seen || !this.running) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiter = undefined;
        resolve();
      };
      const timer = setTimeout(done, this.pollMs);
      this.waiter = done;
    });
  }

  private async renew(): Promise<void> {
    if (this.held.size === 0) return;
    try {
      await renewDispatches(this.o.store.db, this.o.owner, [...this.held], this.leaseMs);
    } catch (err) {
      this.o.logger.warn({ err: describe(err) }, 'renewing dispatch claims failed');
    }
  }

  /** One claimed row. Never throws: a failure leaves the row to be claimed again once the claim lapses. */
  private async process(row: DispatchRow): Promise<void> {
    // Claimed from a table, not a delivery: the row's traceparent (the approval's) is the parent.
    const attributes = { 'grant.id': row.grant_id, 'gate.id': row.gate_id, 'case.id': row.case_id, 'task.id': row.task_id };
    await withSpan(SPAN.effectDispatch, { parent: row.traceparent, attributes }, async () => {
      try {
        if (row.state === 'settling') await this.settle(row);
        else await this.dispatch(row, 0);
      } catch (err) {
        this.o.logger.error({ grantId: row.grant_id, caseId: row.case_id, taskId: row.task_id, state: row.state, err: describe(err) }, 'dispatch step failed; the claim will lapse and the row be taken again');
      }
    });
  }

  // ------------------------------------------------------------------------- the sequence

  private async dispatch(row: DispatchRow, depth: number): Promise<void> {
    // A hint without a lock: the reservation below checks again under the stop row's lock.
    const hard = (await loadFleetStops(this.o.store.db)).find((s) => s.kind === 'hard');
    if (hard?.active) return this.holdForFleetStop(row, hard.reason ?? '');
    const first = await this.load(this.o.store.db, row);
    const refusal = checkAuthority(first.facts);
    if (refusal || !first.packet || !first.gate) return this.refuse(row, first, refusal ?? { reason: 'packet_unusable', detail: 'no packet' }, []);
    const packet = first.packet;
    const gate = first.gate;
    const connector = this.o.connectors.get(packet.operation.connector)!;

    // Mutation identity: a changed tool-call id never makes a second operation.
    let logicalKey: string;
    if (row.call_id === null) {
      const mutationKey = packetMutationKey(packet);
      const prior = await lookupMutation(this.o.store.db, mutationKey);
      if (prior.kind === 'completed' || prior.kind === 'in_doubt') return this.duplicate(row, first, mutationKey, prior);
      logicalKey = prior.kind === 'failed' ? `${mutationKey}#${prior.attempts + 1}` : mutationKey;
    } else {
      const call = await loadEffectCall(this.o.store.db, row.call_id);
      if (!call?.logical_key) throw new EverdictError('effect_call_missing', `dispatch ${row.grant_id} names call ${row.call_id}, which has no logical key`);
      logicalKey = call.logical_key;
    }

    const ctx = { clock: this.o.clock };
    let preflight: PreflightResult;
    try {
      preflight = await connector.preflight(packet, ctx);
    } catch (err) {
      if (err instanceof ConnectorRefused) {
        return this.refuse(row, first, { reason: 'connector_refused', detail: `${err.reason} (${err.violations[0]?.path ?? '/'})` }, [preflightLedger(row, packet, { status: 'refused', reason: err.reason, violations: err.violations })]);
      }
      if (err instanceof ConnectorUnavailable) return this.preflightUnavailable(row, packet, err);
      throw err;
    }
    const preflightEvidence = preflightLedger(row, packet, preflight);
    if (preflight.status === 'preflight_changed') {
      const ids = preflight.changed.map((c) => c.id).join(', ');
      return this.refuse(row, first, { reason: 'preflight_changed', detail: `preconditions no longer hold (${ids}): the packet needs re-planning` }, [preflightEvidence]);
    }

    const reservation = await this.reserve(row, packet, gate, connector, logicalKey, preflightEvidence);
    switch (reservation.kind) {
      case 'refused':
        return this.refuse(row, await this.load(this.o.store.db, row), reservation.refusal, [preflightEvidence]);
      case 'duplicate':
        // A concurrent dispatch journalled the same mutation first; the lookup now finds it.
        if (depth < 2) return this.dispatch(row, depth + 1);
        throw new EverdictError('dispatch_race', `dispatch ${row.grant_id} kept racing on its mutation key`);
      case 'coordination':
        return this.park(row, packet, reservation.key, reservation.holder, preflightEvidence);
      case 'fleet_stopped':
        return this.holdForFleetStop(row, reservation.reason);
      case 'lost':
        this.o.logger.warn({ grantId: row.grant_id, caseId: row.case_id, taskId: row.task_id }, 'dispatch claim lost before reservation; leaving it');
        return;
      case 'reserved':
        break;
    }

    const { callId, attempt, idempotencyKey } = reservation;
    this.o.crash.reach('before_execute', { grantId: row.grant_id, callId, attempt });
    let landed: LandedRecord;
    let status: 'completed' | 'failed' | 'unknown' | 'refused' | undefined;
    try {
      // No abort signal: once sent, the call must come back and be recorded, even while draining.
      const report = await connector.execute(packet, { callId, idempotencyKey }, ctx);
      landed = { callId, attempt, source: 'execute', ...report };
    } catch (err) {
      if (err instanceof ConnectorRefused) {
        landed = { callId, attempt, source: 'refusal', outcome: 'not_applied', reason: `refused_${err.reason}`, established: `the connector refused before contact: ${err.message}`, observedAt: this.o.clock.now().toISOString() };
        status = 'refused';
      } else {
        // A connector throws only before contact by contract; anything else leaves us in doubt.
        landed = { callId, attempt, source: 'execute', outcome: 'unknown', reason: 'connector_error', established: `the connector failed unexpectedly (${describe(err).code}); whether the target was contacted is not known`, observedAt: this.o.clock.now().toISOString() };
      }
    }
    this.o.crash.reach('after_execute', { grantId: row.grant_id, callId, attempt, outcome: landed.outcome });
    const next = await this.recordOutcome(row, packet, landed, status);
    this.o.crash.reach('after_outcome', { grantId: row.grant_id, callId, attempt });
    if (next?.state === 'settling' && next.claimed_by === this.o.owner) await this.settle(next);
  }

  /** Reads everything the authority decision needs (optionally locking the grant row). */
  private async load(q: Queryable, row: DispatchRow, lock = false): Promise<Loaded> {
    const grant = await loadGrant(q, row.grant_id, { lock });
    const gate = grant?.gate_id ? await loadGate(q, grant.gate_id) : undefined;
    const decisions = gate ? await loadDecisions(q, [gate.id]) : [];
    let packetFact: AuthorityFacts['packet'];
    let packetHash: string | undefined;
    if (!gate?.packet_paper_id || gate.packet_revision === null) packetFact = { ok: false, problem: 'the gate pins no packet paper' };
    else {
      try {
        const stored = await readPacketPaper(q, gate.packet_paper_id, gate.packet_revision);
        packetFact = { ok: true, packet: stored.packet };
        packetHash = stored.contentHash;
      } catch (err) {
        if (!isEverdictError(err, 'paper_missing') && !isEverdictError(err, 'paper_corrupt')) throw err;
        packetFact = { ok: false, problem: `the packet paper is unusable (${err.code})` };
      }
    }
    const task = await loadTaskForEffect(q, row.task_id);
    const stop = await loadCaseStop(q, row.case_id);
    const packet = packetFact.ok ? packetFact.packet : undefined;
    return {
      facts: {
        grant,
        gate,
        decisions,
        packet: packetFact,
        task,
        caseStop: stop?.stop_mode ?? null,
        ownCallId: row.call_id,
        connectorKnown: packet !== undefined && this.o.connectors.get(packet.operation.connector) !== undefined,
        binding: packet === undefined ? undefined : this.bindingOf(packet),
      },
      packet,
      packetHash,
      gate,
    };
  }

  /** What the configured connector registers now for the packet's write (checkBinding). */
  private bindingOf(packet: EffectPacket): AuthorityFacts['binding'] {
    const { connector, name } = packet.operation;
    const op = this.o.connectors.get(connector)?.describe().operations.find((o) => o.name === name);
    if (op === undefined) return undefined;
    return { templateHash: op.templateHash, shapeVersion: this.o.shapeVersionOf?.(connector, name) ?? '1' };
  }

    /** Step 4: authority again under the grant lock, intent, grant reservation, impact keys — one unit of work. */
  private async reserve(row: DispatchRow, packet: EffectPacket, gate: GateRow, connector: Connector, logicalKey: string, preflight: LedgerEntry): Promise<Reservation> {
    for (let tries = 0; ; tries++) {
      try {
        return await this.o.store.unitOfWork(async (uow) => {
          const stop = await fleetStopInForce(uow, 'hard');
          if (stop) throw new Abort<Reservation>({ kind: 'fleet_stopped', reason: stop.reason });
          const fresh = await this.load(uow, row, true);
          const refusal = checkAuthority(fresh.facts);
          const requestHash = fresh.packetHash;
          if (refusal) throw new Abort<Reservation>({ kind: 'refused', refusal });
          let callId: string;
          let attempt: number;
          if (row.call_id === null) {
            callId = newId();
            await insertEffectIntent(uow, {
              id: callId,
              taskId: row.task_id,
              toolName: `${connector.name}/${packet.operation.name}`,
              requestPaperId: gate.packet_paper_id!,
              requestHash: requestHash!,
              logicalKey,
            });
            if (!(await reserveGrantFor(uow, row.grant_id, callId))) throw new Abort<Reservation>({ kind: 'refused', refusal: { reason: 'grant_used', detail: 'the grant could not be reserved' } });
            attempt = 1;
          } else {
            callId = row.call_id;
            const reopened = await reopenEffectAttempt(uow, callId, row.attempt);
            if (reopened === undefined) throw new Abort<Reservation>({ kind: 'lost' });
            attempt = reopened;
          }
          const claim = await claimImpactKeys(uow, packet.impactKeys, { caseId: row.case_id, taskId: row.task_id, callId });
          if (!claim.ok) throw new Abort<Reservation>({ kind: 'coordination', key: claim.key, holder: claim.holder });
          const moved = await moveDispatchTo(uow, { grantId: row.grant_id, from: ['pending'], to: 'executing', owner: this.o.owner, keepClaim: true, callId, attempt, checks: 'reset' });
          if (!moved) throw new Abort<Reservation>({ kind: 'lost' });
          const idempotencyKey = effectIdempotencyKey(logicalKey, attempt);
          await appendAll(uow, row.case_id, [
            preflight,
            {
              kind: 'effect_intent',
              body: { grantId: row.grant_id, gateId: row.gate_id, callId, attempt, mutationKey: logicalKey, idempotencyKey, operation: `${connector.name}/${packet.operation.name}`, impactKeys: [...packet.impactKeys].sort() },
            },
          ]);
          return { kind: 'reserved', callId, attempt, idempotencyKey } as Reservation;
        });
      } catch (err) {
        if (err instanceof Abort) return err.result as Reservation;
        if (err instanceof DuplicateKey && String(err.details['constraint'] ?? '').includes('logical_key')) return { kind: 'duplicate' };
        // Two dispatches of one task took the same executor-lane ordinal: take the next one.
        if (err instanceof DuplicateKey && tries < 5) continue;
        throw err;
      }
    }
  }

  /** Step 6: the outcome is persisted before anything else; returns the dispatch row after. */
  private async recordOutcome(row: DispatchRow, packet: EffectPacket, landed: LandedRecord, status?: 'completed' | 'failed' | 'unknown' | 'refused'): Promise<DispatchRow | undefined> {
    const result = await this.o.store.unitOfWork(async (uow) => {
      const recorded = await recordEffectOutcome(uow, row.case_id, landed, status);
      await uow.appendLedger(row.case_id, { kind: 'effect_result', body: { grantId: row.grant_id, ...landedBody(landed), operation: `${packet.operation.connector}/${packet.operation.name}`, recorded } });
      if (!recorded) return undefined;
      if (landed.outcome === 'unknown') {
        const moved = await moveDispatchTo(uow, { grantId: row.grant_id, from: ['executing', 'reconciling'], to: 'reconciling', checks: 'reset', detail: { unknownReason: landed.reason ?? null } });
        await this.emitOutcome(uow, row, null, landed);
        await notifyAtCommit(uow, RECONCILE_CHANNEL);
        return moved;
      }
      return moveDispatchTo(uow, { grantId: row.grant_id, from: ['executing', 'reconciling'], to: 'settling', keepClaim: true });
    });
    if (landed.outcome === 'unknown') this.o.onFinished?.('unknown');
    if (result === undefined) this.o.logger.warn({ grantId: row.grant_id, caseId: row.case_id, taskId: row.task_id, callId: landed.callId }, 'outcome already recorded by another writer; kept as ledger evidence only');
    return result;
  }

  /** Step 7 for a conclusive outcome: post-check, release keys, spend the grant, tell the agent. */
  async settle(row: DispatchRow): Promise<void> {
    if (!row.call_id) throw new EverdictError('effect_call_missing', `settling dispatch ${row.grant_id} has no call`);
    const call = await loadEffectCall(this.o.store.db, row.call_id);
    const landed = call ? await loadLandedRecord(this.o.store.db, call) : undefined;
    if (!call || !landed) throw new EverdictError('effect_call_missing', `settling dispatch ${row.grant_id}: call ${row.call_id} has no recorded outcome`);
    const loaded = await this.load(this.o.store.db, row);
    const connector = loaded.packet ? this.o.connectors.get(loaded.packet.operation.connector) : undefined;

    let postCheck: { status: CheckOutcome['status'] | 'unavailable' | 'refused'; detail?: unknown } | undefined;
    if (loaded.packet && connector && (landed.outcome === 'applied' || landed.outcome === 'partly_applied') && loaded.packet.assertions.length > 0) {
      try {
        const outcome = await checkAssertions(connector, loaded.packet, { clock: this.o.clock });
        postCheck = outcome.status === 'holds' ? { status: 'holds', detail: outcome.checked } : { status: 'violated', detail: outcome.mismatches };
      } catch (err) {
        if (err instanceof ConnectorUnavailable) postCheck = { status: 'unavailable', detail: err.message };
        else if (err instanceof ConnectorRefused) postCheck = { status: 'refused', detail: err.reason };
        else throw err;
      }
    }

    await this.o.store.unitOfWork(async (uow) => {
      const evidence: LedgerEntry[] = [];
      if (postCheck) evidence.push({ kind: 'effect_postcheck', body: { grantId: row.grant_id, callId: call.id, status: postCheck.status, detail: postCheck.detail ?? null } });
      const released = await releaseImpactKeysOf(uow, call.id);
      await consumeGrantBy(uow, row.grant_id, call.id);
      const moved = await moveDispatchTo(uow, { grantId: row.grant_id, from: ['settling'], to: 'settled', owner: this.o.owner, detail: { outcome: landed.outcome } });
      if (!moved) throw new Abort<void>(undefined);
      const note = postCheck ? `; post-check: assertions ${postCheck.status}` : '';
      await this.emitOutcome(uow, row, loaded.facts.grant?.packet_digest ?? null, { ...landed, established: `${landed.established}${note}`.slice(0, 2000) });
      evidence.push({ kind: 'effect_settled', body: { grantId: row.grant_id, callId: call.id, attempt: landed.attempt, outcome: landed.outcome, releasedKeys: released } });
      await appendAll(uow, row.case_id, evidence);
      if (released.length > 0) await notifyAtCommit(uow, DISPATCH_CHANNEL);
    }).catch((err: unknown) => {
      if (err instanceof Abort) return;
      throw err;
    });
    this.o.onFinished?.('settled');
  }

  // ------------------------------------------------------------------------- side paths

  /** Refused before contact: journalled, the agent told, the dispatch closed. */
  private async refuse(row: DispatchRow, loaded: Loaded, refusal: DispatchRefusal, evidence: readonly LedgerEntry[]): Promise<void> {
    const { grant, gate } = { grant: loaded.facts.grant, gate: loaded.gate };
    const done = await this.o.store.unitOfWork(async (uow) => {
      let callId = row.call_id;
      const established = `refused before contact: ${refusal.detail}`;
      if (callId === null) {
        callId = newId();
        const call = await journalRefusal(
          uow,
          row.case_id,
          { id: callId, taskId: row.task_id, toolName: loaded.packet ? `${loaded.packet.operation.connector}/${loaded.packet.operation.name}` : 'unknown', requestPaperId: gate?.packet_paper_id ?? null, requestHash: loaded.packetHash ?? null },
          { established, reason: refusal.reason, observedAt: this.o.clock.now().toISOString() },
        );
        if (!call) callId = null;
      } else {
        // A new attempt refused: the last attempt was proven not applied, so its keys go back.
        await releaseImpactKeysOf(uow, callId);
        await consumeGrantBy(uow, row.grant_id, callId);
      }
      if (refusal.reason === 'grant_expired' && grant) await markGrantExpired(uow, grant.id);
      const moved = await moveDispatchTo(uow, { grantId: row.grant_id, from: ['pending'], to: 'refused', owner: this.o.owner, ...(callId ? { callId } : {}), detail: { refused: refusal.reason, why: refusal.detail } });
      if (!moved) throw new Abort<boolean>(false);
      await appendAll(uow, row.case_id, [...evidence, { kind: 'effect_refused', body: { grantId: row.grant_id, gateId: row.gate_id, callId, reason: refusal.reason, detail: refusal.detail } }]);
      if (callId) {
        await this.emitOutcome(uow, row, grant?.packet_digest ?? gate?.packet_digest ?? null, {
          callId,
          attempt: row.attempt || 1,
          source: 'refusal',
          outcome: 'not_applied',
          reason: refusal.reason,
          established,
          observedAt: this.o.clock.now().toISOString(),
        });
      }
      return true;
    }).catch((err: unknown) => {
      if (err instanceof Abort) return err.result as boolean;
      throw err;
    });
    if (done) {
      this.o.logger.warn({ grantId: row.grant_id, caseId: row.case_id, reason: refusal.reason }, 'effect refused before contact');
      this.o.onFinished?.('refused');
    }
  }

  /** The same mutation was journalled before: return its receipt (or let it reconcile); spend nothing. */
  private async duplicate(row: DispatchRow, loaded: Loaded, mutationKey: string, prior: Extract<MutationLookup, { kind: 'completed' | 'in_doubt' }>): Promise<void> {
    const existing = prior.call;
    await this.o.store.unitOfWork(async (uow) => {
      const moved = await moveDispatchTo(uow, { grantId: row.grant_id, from: ['pending'], to: 'settled', owner: this.o.owner, detail: { duplicateOf: existing.id } });
      if (!moved) throw new Abort<void>(undefined);
      await revokeGrantNow(uow, row.grant_id, `duplicate mutation: the same change is journalled as call ${existing.id}`);
      await uow.appendLedger(row.case_id, { kind: 'effect_duplicate', body: { grantId: row.grant_id, mutationKey, existingCallId: existing.id, existingStatus: existing.status } });
      const original = await loadDispatchOfCall(uow, existing.id);
      const originalGrant = original ? await loadGrant(uow, original.grant_id) : undefined;
      const landed: LandedRecord =
        prior.kind === 'completed' && prior.landed
          ? { ...prior.landed, established: `already applied as call ${existing.id} (the same change proposed again): ${prior.landed.established}`.slice(0, 2000) }
          : { callId: existing.id, attempt: existing.effect_attempt ?? 1, source: 'what_landed', outcome: 'unknown', reason: 'in_reconciliation', established: `the same change is call ${existing.id}, whose outcome is still being established`, observedAt: this.o.clock.now().toISOString() };
      await enqueuePlatformMessage(uow, COORDINATOR_SERVICE, 'effect.outcome', row.case_id, {
        taskId: row.task_id,
        callId: existing.id,
        grantId: original?.grant_id ?? row.grant_id,
        packetDigest: originalGrant?.packet_digest ?? loaded.facts.grant?.packet_digest ?? '',
        outcome: landed.outcome,
        established: landed.established,
        ...(landed.receipt ? { receipt: landed.receipt } : {}),
      });
    }).catch((err: unknown) => {
      if (err instanceof Abort) return;
      throw err;
    });
    this.o.onFinished?.('duplicate');
  }

  /** An impact key is held by another call: park as a coordination decision until it is released. */
  private async park(row: DispatchRow, packet: EffectPacket, key: string, holder: { case_id: string; call_id: string | null } | undefined, preflight: LedgerEntry): Promise<void> {
    await this.o.store.unitOfWork(async (uow) => {
      const moved = await moveDispatchTo(uow, {
        grantId: row.grant_id,
        from: ['pending'],
        to: 'coordination',
        owner: this.o.owner,
        waitingKey: key,
        detail: { coordination: { impactKey: key, heldByCase: holder?.case_id ?? null, heldByCall: holder?.call_id ?? null } },
      });
      if (!moved) throw new Abort<void>(undefined);
      await appendAll(uow, row.case_id, [
        preflight,
        {
          kind: 'effect_coordination',
          body: { grantId: row.grant_id, gateId: row.gate_id, impactKey: key, heldByCase: holder?.case_id ?? null, heldByCall: holder?.call_id ?? null, sameCase: holder?.case_id === row.case_id, operation: `${packet.operation.connector}/${packet.operation.name}` },
        },
      ]);
    }).catch((err: unknown) => {
      if (err instanceof Abort) return;
      throw err;
    });
    this.o.logger.info({ grantId: row.grant_id, caseId: row.case_id }, 'dispatch parked for coordination on an impact key');
    this.o.onFinished?.('coordination');
  }

  /**
   * A fleet hard stop is in force: nothing is sent, nothing refused — the dispatch stays pending
   * (marked held, which the resume clears to make it due at once) and is looked at again later.
   * The case's ledger records the hold once per dispatch, not once per look.
   */
  private async holdForFleetStop(row: DispatchRow, reason: string): Promise<void> {
    const first = row.detail[FLEET_STOP_HELD] === undefined;
    await this.o.store.unitOfWork(async (uow) => {
      const moved = await moveDispatchTo(uow, { grantId: row.grant_id, from: ['pending'], to: 'pending', owner: this.o.owner, delayMs: this.o.fleetStopRecheckMs ?? 2_000, detail: { [FLEET_STOP_HELD]: true } });
      if (!moved) throw new Abort<void>(undefined);
      if (first) await uow.appendLedger(row.case_id, { kind: 'effect_held', body: { grantId: row.grant_id, gateId: row.gate_id, why: 'fleet_hard_stop', reason } });
    }).catch((e: unknown) => {
      if (e instanceof Abort) return;
      throw e;
    });
    if (first) this.o.logger.info({ grantId: row.grant_id, caseId: row.case_id }, 'dispatch held: a fleet hard stop is in force');
  }

  /** The target could not be read: nothing was sent; try again after a backoff. */
  private async preflightUnavailable(row: DispatchRow, packet: EffectPacket, err: ConnectorUnavailable): Promise<void> {
    await this.o.store.unitOfWork(async (uow) => {
      const moved = await moveDispatchTo(uow, { grantId: row.grant_id, from: ['pending'], to: 'pending', owner: this.o.owner, checks: 'increment', delayMs: jitteredBackoffMs(backoffDelay(row.checks, this.preflightBackoff)) });
      if (!moved) throw new Abort<void>(undefined);
      await uow.appendLedger(row.case_id, { kind: 'effect_preflight', body: { grantId: row.grant_id, status: 'unavailable', operation: `${packet.operation.connector}/${packet.operation.name}`, detail: err.message } });
    }).catch((e: unknown) => {
      if (e instanceof Abort) return;
      throw e;
    });
  }

  private async emitOutcome(uow: UnitOfWork, row: DispatchRow, packetDigest: string | null, landed: LandedRecord): Promise<void> {
    const attributes = { 'grant.id': row.grant_id, 'case.id': row.case_id, 'task.id': row.task_id, 'call.id': landed.callId, outcome: landed.outcome };
    await withSpan(SPAN.effectOutcome, { attributes }, async () =>
      enqueuePlatformMessage(uow, COORDINATOR_SERVICE, 'effect.outcome', row.case_id, {
        taskId: row.task_id,
        callId: landed.callId,
        grantId: row.grant_id,
        packetDigest: packetDigest ?? (await loadGrant(uow, row.grant_id))?.packet_digest ?? '',
        outcome: landed.outcome,
        established: landed.established.slice(0, 2000),
        ...(landed.receipt ? { receipt: landed.receipt } : {}),
      }),
    );
  }
}

interface LedgerEntry {
  readonly kind: string;
  readonly body: unknown;
}

async function appendAll(uow: UnitOfWork, caseId: string, entries: readonly LedgerEntry[]): Promise<void> {
  for (const e of entries) await uow.appendLedger(caseId, e);
}

function preflightLedger(row: DispatchRow, packet: EffectPacket, result: PreflightResult | { status: 'refused'; reason: string; violations: unknown }): LedgerEntry {
  return { kind: 'effect_preflight', body: { grantId: row.grant_id, operation: `${packet.operation.connector}/${packet.operation.name}`, ...result } };
}

function landedBody(l: LandedRecord): Record<string, unknown> {
  return { callId: l.callId, attempt: l.attempt, source: l.source, outcome: l.outcome, established: l.established, reason: l.reason ?? null, receipt: l.receipt ?? null, observedAt: l.observedAt };
}

function describe(err: unknown): { code: string; message: string } {
  if (isEverdictError(err)) return { code: err.code, message: err.message };
  return { code: 'internal', message: err instanceof Error ? err.message : String(err) };
}
