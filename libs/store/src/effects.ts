/**
 * The effect path's durable operations (DESIGN §6, seed 004 §2.2, §5, §7), as functions over a
 * unit of work or a Queryable: gates and decisions, grants, impact claims, the coordinator's
 * dispatch rows and the effect journal calls. Added for the gate, the execution coordinator and
 * the reconciler (issue 5); nothing here changes the Store or UnitOfWork classes.
 *
 * Invariants these functions keep (each backed by a WHERE clause, a constraint or a lock):
 * - a grant is reserved by exactly one journal call and only while issued, unexpired and
 *   unrevoked (database clock); a second reservation updates nothing;
 * - an effect call's outcome is recorded once per attempt: only an attempt in doubt (intent or
 *   unknown) is updated, so a late writer can add evidence to the ledger but never overwrite;
 * - impact keys are claimed in sorted order and released only by the call that holds them,
 *   which the callers do only on a conclusive outcome.
 */
import { buildEnvelope, encodeEnvelope, sha256Hex, systemClock, trustLabelFor, validatePacket } from '@everdict/contracts';
import { currentTraceparent, traceparentField } from '@everdict/tracing';
import type { CurrentVersion, EffectPacket, GateState, MessageType, PayloadOf, SenderService, Verdict, WhatLanded } from '@everdict/contracts';
import { refreshCaseState } from './caseState.js';
import type { Queryable } from './db.js';
import { PaperCorrupt, PaperMissing } from './errors.js';
import {
  abandonLapsedExecutions,
  claimDispatches,
  countUnknownEffects,
  insertDispatch,
  insertEffectCall,
  moveDispatch,
  openGateWaits,
  parkedAges,
  recordEffectCallOutcome,
  releaseStaleOutbox,
  renewDispatchClaims,
  reopenEffectCall,
  selectCallsByMutationKey,
  selectCaseStop,
  selectDispatchByCall,
  selectEffectCall,
  selectTaskForEffect,
  setCaseStopMode,
} from './sql/effects.js';
import type { DispatchMove, DispatchRow, EffectCallRow } from './sql/effects.js';
import { closeGate, expireDueGates, gateExpired, insertDecision, insertGate, selectDecisions, selectGate, selectGatesForRoles } from './sql/gates.js';
import type { DecisionRow, GateRow, NewGate } from './sql/gates.js';
import { consumeGrant, expireDueGrants, expireGrant, insertGrant, reserveGrant, revokeGrant, selectGrant, selectGrantByGate } from './sql/grants.js';
import type { GrantRow } from './sql/grants.js';
import { claimImpactKey, releaseImpactKeys, selectImpactHolder, wakeImpactWaiters, wakeOrphanedWaiters } from './sql/impact.js';
import type { ImpactHolderRow } from './sql/impact.js';
import { selectPaperRevision } from './sql/papers.js';
import { UnitOfWork } from './unitOfWork.js';

export type { DispatchRow, EffectCallRow } from './sql/effects.js';
export type { DecisionRow, GateRow, RequiredDecision } from './sql/gates.js';
export type { GrantRow } from './sql/grants.js';

/** effect_dispatches.state, in the order a dispatch normally passes through them (see 0003). */
export const EFFECT_DISPATCH_STATES = ['pending', 'coordination', 'executing', 'reconciling', 'settling', 'settled', 'refused'] as const;
type EffectDispatchState = (typeof EFFECT_DISPATCH_STATES)[number];

/** Schema id of the packet paper a gate request points at. */
export const PACKET_PAPER_SCHEMA = 'https://everdict.dev/schemas/effect-packet.schema.json';
/** Schema id of an effect call's landed-report paper (its response). */
const LANDED_PAPER_SCHEMA = 'everdict.effect-landed.v1';

// ----------------------------------------------------------------------------- gates

/** Opens (or records as refused) a gate; false when the gate id already exists. */
export async function openGate(uow: UnitOfWork, g: NewGate): Promise<boolean> {
  // The gate keeps the trace it was requested under: the decision, hours later, continues it.
  const opened = (await uow.query(insertGate({ ...g, traceparent: g.traceparent ?? currentTraceparent() ?? null }))).rowCount === 1;
  if (opened) await refreshCaseState(uow, g.caseId, { cause: 'gate_opened', gateId: g.id, taskId: g.taskId });
  return opened;
}

export async function loadGate(q: Queryable, gateId: string, opts: { lock?: boolean } = {}): Promise<GateRow | undefined> {
  return (await q.query<GateRow>(selectGate(gateId, opts.lock ?? false))).rows[0];
}

export async function listGatesForRoles(q: Queryable, state: GateState, roles: readonly string[], limit = 200): Promise<GateRow[]> {
  if (roles.length === 0) return [];
  return (await q.query<GateRow>(selectGatesForRoles(state, roles, limit))).rows;
}

export async function loadDecisions(q: Queryable, gateIds: readonly string[]): Promise<DecisionRow[]> {
  if (gateIds.length === 0) return [];
  return (await q.query<DecisionRow>(selectDecisions(gateIds))).rows;
}

/** Records one decision; false when that decision of that gate was already answered. */
export async function recordDecision(
  uow: UnitOfWork,
  d: { id: string; gateId: string; decision: string; verdict: Verdict; principal: string; role: string; digest: string; reason: string | null },
): Promise<boolean> {
  return (await uow.query(insertDecision(d))).rowCount === 1;
}

/** Closes an open gate (or revokes an approved one); false when it was not in such a state. */
export async function closeGateAs(uow: UnitOfWork, gateId: string, state: Exclude<GateState, 'open'>, reason: string | null): Promise<boolean> {
  if ((await uow.query(closeGate(gateId, state, reason))).rowCount !== 1) return false;
  const caseId = (await uow.query<{ case_id: string }>({ text: 'SELECT case_id FROM gates WHERE id = $1::uuid', values: [gateId] })).rows[0]?.case_id;
  if (caseId !== undefined) await refreshCaseState(uow, caseId, { cause: `gate_${state}`, gateId });
  return true;
}

export async function isGateExpired(q: Queryable, gateId: string): Promise<boolean> {
  return (await q.query<{ expired: boolean }>(gateExpired(gateId))).rows[0]?.expired ?? false;
}

/** Open gates past their expiry become 'expired' in this unit of work; returns them. */
export async function expireGates(uow: UnitOfWork, limit: number): Promise<{ id: string; case_id: string; task_id: string; packet_digest: string }[]> {
  const expired = (await uow.query<{ id: string; case_id: string; task_id: string; packet_digest: string }>(expireDueGates(limit))).rows;
  for (const g of expired) await refreshCaseState(uow, g.case_id, { cause: 'gate_expired', gateId: g.id, taskId: g.task_id });
  return expired;
}

// ----------------------------------------------------------------------------- grants

export async function issueGrant(uow: UnitOfWork, g: { id: string; caseId: string; gateId: string; taskId: string; packetDigest: string; ttlMs: number }): Promise<GrantRow> {
  return (await uow.query<GrantRow>(insertGrant(g))).rows[0]!;
}

export async function loadGrant(q: Queryable, grantId: string, opts: { lock?: boolean } = {}): Promise<GrantRow | undefined> {
  return (await q.query<GrantRow>(selectGrant(grantId, opts.lock ?? false))).rows[0];
}

export async function loadGrantOfGate(q: Queryable, gateId: string): Promise<GrantRow | undefined> {
  return (await q.query<GrantRow>(selectGrantByGate(gateId))).rows[0];
}

/** Reserves the grant for one call; false for a grant that is not issued, expired or revoked. */
export async function reserveGrantFor(uow: UnitOfWork, grantId: string, callId: string): Promise<boolean> {
  return (await uow.query(reserveGrant(grantId, callId))).rowCount === 1;
}

export async function consumeGrantBy(uow: UnitOfWork, grantId: string, callId: string): Promise<boolean> {
  return (await uow.query(consumeGrant(grantId, callId))).rowCount === 1;
}

/** Revokes an issued or reserved grant; undefined when there was nothing left to revoke. */
export async function revokeGrantNow(uow: UnitOfWork, grantId: string, reason: string): Promise<{ state: string } | undefined> {
  return (await uow.query<{ id: string; state: string }>(revokeGrant(grantId, reason))).rows[0];
}

export async function markGrantExpired(uow: UnitOfWork, grantId: string): Promise<boolean> {
  return (await uow.query(expireGrant(grantId))).rowCount === 1;
}

export async function expireGrants(uow: UnitOfWork, limit: number): Promise<{ id: string; case_id: string; gate_id: string | null; task_id: string | null; packet_digest: string }[]> {
  return (await uow.query<{ id: string; case_id: string; gate_id: string | null; task_id: string | null; packet_digest: string }>(expireDueGrants(limit))).rows;
}

// ----------------------------------------------------------------------------- packets

export interface StoredPacket {
  readonly packet: EffectPacket;
  readonly contentHash: string;
}

/**
 * Reads one packet paper revision and verifies its bytes against the stored hash and the packet
 * schema. The digest is NOT checked here: the caller compares it with what was approved.
 *
 * @throws PaperMissing when the revision has no bytes; PaperCorrupt when the bytes do not match
 *   their hash, are not JSON or are not a valid packet (naming the first violated path).
 */
export async function readPacketPaper(q: Queryable, paperId: string, revision: number): Promise<StoredPacket> {
  const { rows } = await q.query<{ bytes: Buffer | null; content_hash: string }>(selectPaperRevision(paperId, revision));
  const row = rows[0];
  if (!row?.bytes) throw new PaperMissing(paperId);
  const actual = `sha256:${sha256Hex(row.bytes)}`;
  if (actual !== row.content_hash) throw new PaperCorrupt(paperId, row.content_hash, actual);
  let parsed: unknown;
  try {
    parsed = JSON.parse(row.bytes.toString('utf8'));
  } catch {
    throw new PaperCorrupt(paperId, 'an effect packet (JSON)', 'bytes that are not JSON');
  }
  const validation = validatePacket(parsed);
  if (!validation.ok) throw new PaperCorrupt(paperId, 'a valid effect packet', `a packet violating ${validation.violations[0]?.path ?? '/'}`);
  return { packet: validation.packet, contentHash: row.content_hash };
}

/** The head revision number of a paper (a gate pins the revision it was opened for). */
export async function paperHeadRevision(q: Queryable, paperId: string): Promise<{ revision: number; caseId: string; schemaId: string } | undefined> {
  const { rows } = await q.query<{ head_revision: number; case_id: string; schema_id: string }>({
    text: `SELECT p.head_revision, p.case_id, r.schema_id FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
            WHERE p.id = $1::uuid`,
    values: [paperId],
  });
  const r = rows[0];
  return r ? { revision: r.head_revision, caseId: r.case_id, schemaId: r.schema_id } : undefined;
}

// ----------------------------------------------------------------------------- impact keys

type ImpactClaim = { readonly ok: true } | { readonly ok: false; readonly key: string; readonly holder: ImpactHolderRow | undefined };

/**
 * Claims every key for the call, in sorted order (two claimers of overlapping sets never wait
 * on each other in opposite orders). Stops at the first key another call holds; the caller
 * rolls the unit of work back, so a partial claim never commits.
 */
export async function claimImpactKeys(uow: UnitOfWork, keys: readonly string[], c: { caseId: string; taskId: string; callId: string }): Promise<ImpactClaim> {
  for (const key of [...new Set(keys)].sort()) {
    const got = await uow.query(claimImpactKey({ impactKey: key, ...c }));
    if (got.rowCount === 0) {
      const holder = (await uow.query<ImpactHolderRow>(selectImpactHolder(key))).rows[0];
      return { ok: false, key, holder };
    }
  }
  return { ok: true };
}

/** Releases the call's keys and wakes dispatches parked on them; returns the released keys. */
export async function releaseImpactKeysOf(uow: UnitOfWork, callId: string): Promise<string[]> {
  const keys = (await uow.query<{ impact_key: string }>(releaseImpactKeys(callId))).rows.map((r) => r.impact_key);
  if (keys.length > 0) await uow.query(wakeImpactWaiters(keys));
  return keys;
}

export async function wakeOrphanedImpactWaiters(q: Queryable, limit: number): Promise<number> {
  return (await q.query(wakeOrphanedWaiters(limit))).rowCount;
}

// ----------------------------------------------------------------------------- dispatches

/** Queues an approved grant for dispatch; false when it was queued before. */
export async function queueDispatch(uow: UnitOfWork, d: { grantId: string; gateId: string; caseId: string; taskId: string }): Promise<boolean> {
  // The dispatch keeps the approval's trace: the dispatcher loop, which claims it later, continues it.
  const queued = (await uow.query(insertDispatch({ ...d, traceparent: currentTraceparent() ?? null }))).rowCount === 1;
  if (queued) await refreshCaseState(uow, d.caseId, { cause: 'dispatch_queued', grantId: d.grantId, gateId: d.gateId, taskId: d.taskId });
  return queued;
}

/** The dispatch whose journal call is `callId`. */
export async function loadDispatchOfCall(q: Queryable, callId: string): Promise<DispatchRow | undefined> {
  return (await q.query<DispatchRow>(selectDispatchByCall(callId))).rows[0];
}

export async function claimDueDispatches(q: Queryable, owner: string, states: readonly EffectDispatchState[], limit: number, leaseMs: number): Promise<DispatchRow[]> {
  return (await q.query<DispatchRow>(claimDispatches(owner, states, limit, leaseMs))).rows;
}

export async function renewDispatches(q: Queryable, owner: string, grantIds: readonly string[], leaseMs: number): Promise<Set<string>> {
  if (grantIds.length === 0) return new Set();
  return new Set((await q.query<{ grant_id: string }>(renewDispatchClaims(owner, grantIds, leaseMs))).rows.map((r) => r.grant_id));
}

/**
 * Moves a dispatch between states; undefined when it was not in `from` (or not claimed by `owner`).
 * In a unit of work, a move into a final state re-derives the case state with it; a move
 * between live states never changes it (every live dispatch state counts as held).
 */
export async function moveDispatchTo(q: Queryable, m: DispatchMove & { to: EffectDispatchState; from: readonly EffectDispatchState[] }): Promise<DispatchRow | undefined> {
  const moved = (await q.query<DispatchRow>(moveDispatch(m))).rows[0];
  if (moved && (m.to === 'settled' || m.to === 'refused') && q instanceof UnitOfWork) {
    await refreshCaseState(q, moved.case_id, { cause: `dispatch_${m.to}`, grantId: moved.grant_id, gateId: moved.gate_id, taskId: moved.task_id });
  }
  return moved;
}

/** The crash rule (see abandonLapsedExecutions): lapsed executions go to reconciliation. */
export async function abandonLapsed(q: Queryable, limit: number): Promise<DispatchRow[]> {
  return (await q.query<DispatchRow>(abandonLapsedExecutions(limit))).rows;
}

// ----------------------------------------------------------------------------- effect calls

/** Idempotency key of one attempt of an effect call: derived from the logical key, so stable across restarts. */
export function effectIdempotencyKey(logicalKey: string, attempt: number): string {
  return `everdict-${sha256Hex(logicalKey).slice(0, 48)}-${attempt}`;
}

export async function insertEffectIntent(
  uow: UnitOfWork,
  c: { id: string; taskId: string; toolName: string; requestPaperId: string; requestHash: string; logicalKey: string },
): Promise<EffectCallRow> {
  return (await uow.query<EffectCallRow>(insertEffectCall({ ...c, status: 'intent', attempt: 1 }))).rows[0]!;
}

/**
 * Journals a dispatch refused before any contact: an effect call holding no mutation key (it
 * claims nothing), whose response paper says why. The agent's `effect.outcome` names this call.
 * Undefined when the task does not exist (nothing to journal under).
 */
export async function journalRefusal(
  uow: UnitOfWork,
  caseId: string,
  c: { id: string; taskId: string; toolName: string; requestPaperId: string | null; requestHash: string | null },
  why: { established: string; reason: string; observedAt: string },
): Promise<EffectCallRow | undefined> {
  const call = (await uow.query<EffectCallRow>(insertEffectCall({ ...c, status: 'intent', logicalKey: null, attempt: 1 }))).rows[0];
  if (!call) return undefined;
  await recordEffectOutcome(uow, caseId, { callId: c.id, attempt: 1, source: 'refusal', outcome: 'not_applied', ...why }, 'refused');
  return call;
}

export async function loadEffectCall(q: Queryable, callId: string): Promise<EffectCallRow | undefined> {
  return (await q.query<EffectCallRow>(selectEffectCall(callId))).rows[0];
}

/** The next attempt of a call proven not applied; undefined when it was not in that state. */
export async function reopenEffectAttempt(uow: UnitOfWork, callId: string, fromAttempt: number): Promise<number | undefined> {
  return (await uow.query<{ effect_attempt: number }>(reopenEffectCall(callId, fromAttempt))).rows[0]?.effect_attempt;
}

/** The journal status a WhatLanded answer maps to. */
function callStatusFor(outcome: WhatLanded): 'completed' | 'failed' | 'unknown' {
  if (outcome === 'applied') return 'completed';
  if (outcome === 'unknown') return 'unknown';
  // not_applied: nothing happened; partly_applied: conclusive but needs compensation or a human.
  return 'failed';
}

/** What a connector answered, as stored in the call's response paper. */
export interface LandedRecord {
  readonly callId: string;
  readonly attempt: number;
  readonly source: 'execute' | 'what_landed' | 'refusal' | 'abandoned' | 'operator';
  readonly outcome: WhatLanded;
  readonly established: string;
  readonly reason?: string;
  readonly receipt?: Record<string, unknown>;
  readonly observedAt: string;
}

/**
 * Persists what landed for one attempt (response paper + call row), if that attempt is still in
 * doubt. Returns false when another writer recorded it first; the caller then only records its
 * evidence in the ledger.
 */
export async function recordEffectOutcome(
  uow: UnitOfWork,
  caseId: string,
  rec: LandedRecord,
  status: 'completed' | 'failed' | 'unknown' | 'refused' = callStatusFor(rec.outcome),
): Promise<boolean> {
  const bytes = Buffer.from(JSON.stringify(rec), 'utf8');
  const paper = await uow.putPaper({ caseId, kind: 'artefact', name: `effects/${rec.callId}/landed`, schemaId: LANDED_PAPER_SCHEMA, bytes });
  const { rowCount } = await uow.query(
    recordEffectCallOutcome({ id: rec.callId, attempt: rec.attempt, status, outcomeClass: rec.outcome, responsePaperId: paper.paperId, responseHash: paper.contentHash }),
  );
  return rowCount === 1;
}

/** Reads the latest landed record of a call (its response paper), if any. */
export async function loadLandedRecord(q: Queryable, call: Pick<EffectCallRow, 'response_paper_id'>): Promise<LandedRecord | undefined> {
  if (!call.response_paper_id) return undefined;
  const { rows } = await q.query<{ bytes: Buffer | null; content_hash: string }>(selectPaperRevision(call.response_paper_id));
  const row = rows[0];
  if (!row?.bytes) throw new PaperMissing(call.response_paper_id);
  const actual = `sha256:${sha256Hex(row.bytes)}`;
  if (actual !== row.content_hash) throw new PaperCorrupt(call.response_paper_id, row.content_hash, actual);
  return JSON.parse(row.bytes.toString('utf8')) as LandedRecord;
}

export type MutationLookup =
  | { readonly kind: 'none' }
  /** Applied before: return this receipt, never run it again. */
  | { readonly kind: 'completed'; readonly call: EffectCallRow; readonly landed: LandedRecord | undefined }
  /** In flight or unknown: reconcile it; nothing new may start for this key. */
  | { readonly kind: 'in_doubt'; readonly call: EffectCallRow }
  /** Conclusively not applied (or partly applied): a new approved packet decides what happens next. */
  | { readonly kind: 'failed'; readonly call: EffectCallRow; readonly landed: LandedRecord | undefined; readonly attempts: number };

/**
 * The mutation-key lookup (seed 004 §2.2) that `writes.propose` and the coordinator make before
 * anything new runs: a changed tool-call id never changes the key, so a re-proposal finds the
 * earlier call. `attempts` counts the calls made under the key (for the next retry key).
 */
export async function lookupMutation(q: Queryable, mutationKey: string): Promise<MutationLookup> {
  const calls = (await q.query<EffectCallRow>(selectCallsByMutationKey(mutationKey))).rows;
  const latest = calls[0];
  if (!latest) return { kind: 'none' };
  if (latest.status === 'completed') return { kind: 'completed', call: latest, landed: await loadLandedRecord(q, latest) };
  if (latest.status === 'intent' || latest.status === 'unknown') return { kind: 'in_doubt', call: latest };
  return { kind: 'failed', call: latest, landed: await loadLandedRecord(q, latest), attempts: calls.length };
}

export async function countUnknownEffectCalls(q: Queryable): Promise<number> {
  return (await q.query<{ n: number }>(countUnknownEffects())).rows[0]?.n ?? 0;
}

// ----------------------------------------------------------------------------- cases, tasks

export async function loadCaseStop(q: Queryable, caseId: string): Promise<{ id: string; customer: string; stop_mode: 'hard' | 'soft' | null } | undefined> {
  return (await q.query<{ id: string; customer: string; stop_mode: 'hard' | 'soft' | null }>(selectCaseStop(caseId))).rows[0];
}

/**
 * Sets the case-level stop (the cancel endpoint's durable half). 'hard' refuses every new
 * effect at dispatch from the next dispatch on; reconciliation of submitted effects continues.
 */
export async function setCaseStop(q: Queryable, caseId: string, mode: 'hard' | 'soft' | null): Promise<boolean> {
  return (await q.query(setCaseStopMode(caseId, mode))).rowCount === 1;
}

export async function loadTaskForEffect(q: Queryable, taskId: string): Promise<{ id: string; case_id: string; state: string; cancel_requested: string | null; fence_epoch: number } | undefined> {
  return (await q.query<{ id: string; case_id: string; state: string; cancel_requested: string | null; fence_epoch: number }>(selectTaskForEffect(taskId))).rows[0];
}

export async function parkedTaskAges(q: Queryable): Promise<{ park_reason: string; age_seconds: number; parked: number }[]> {
  return (await q.query<{ park_reason: string; age_seconds: number; parked: number }>(parkedAges())).rows;
}

/** Open gates per kind with the quantiles of their wait so far, in seconds. */
export interface OpenGateWaits {
  readonly kind: string;
  readonly open: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly oldest: number;
}

export async function openGateWaitTimes(q: Queryable): Promise<OpenGateWaits[]> {
  return (await q.query<OpenGateWaits>(openGateWaits())).rows;
}

export async function releaseStaleOutboxClaims(q: Queryable, graceMs: number, limit: number): Promise<number> {
  return (await q.query(releaseStaleOutbox(graceMs, limit))).rowCount;
}

// ----------------------------------------------------------------------------- messages

/**
 * Enqueues a message the runtime sends on no task's behalf (gate, coordinator, reconciler): the
 * envelope is stamped with the service as sender and an empty lineage, validated, and committed
 * with the unit of work. Returns the message id.
 */
export async function enqueuePlatformMessage<T extends MessageType>(uow: UnitOfWork, service: SenderService, type: T, caseId: string, payload: PayloadOf<T, CurrentVersion<T>>): Promise<string> {
  const envelope = buildEnvelope(
    {
      type,
      version: 1 as CurrentVersion<T>,
      caseId,
      lineage: { rootCaseId: caseId, parentTaskId: null, ancestry: [] },
      sender: { service, taskId: null, profile: null, profileVersion: null },
      trust: trustLabelFor(type, payload, 'service'),
      payload,
      ...traceparentField(),
    },
    systemClock,
  );
  await uow.enqueue({ id: envelope.id, type, caseId, traceparent: envelope.traceparent }, encodeEnvelope(envelope));
  return envelope.id;
}

/** Notifies `channel` at COMMIT (Postgres delivers NOTIFY only when the transaction commits). */
export async function notifyAtCommit(uow: UnitOfWork, channel: string): Promise<void> {
  await uow.query({ text: 'SELECT pg_notify($1::text, $2::text)', values: [channel, ''] });
}

/** Channel the coordinator listens on: a dispatch became due. */
export const DISPATCH_CHANNEL = 'everdict_effect_dispatch';
/** Channel the reconciler listens on: an effect outcome became unknown. */
export const RECONCILE_CHANNEL = 'everdict_effect_reconcile';
