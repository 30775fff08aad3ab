/**
 * Statements of the effect path (seed 004 §5, §7): the coordinator's dispatch rows, the effect
 * journal calls (RUNTIME_CALLS kind 'effect'), and the reconciler's sweeps. Claims and expiry
 * use the DATABASE clock; sweeps lock with SKIP LOCKED so any number of processes run them.
 */
import type { Sql } from '../db.js';

/**
 * The journal lane of the execution coordinator: effect calls are RUNTIME_CALLS rows of the
 * proposing task at this turn number, which no agent turn reaches (turns count up from 0), so
 * a turn's restore never meets an executor call. Ordinals count up within the lane.
 */
const EXECUTOR_TURN = 2_147_483_647;

export interface DispatchRow {
  grant_id: string;
  gate_id: string;
  case_id: string;
  task_id: string;
  state: string;
  call_id: string | null;
  attempt: number;
  waiting_key: string | null;
  claimed_by: string | null;
  claimed_until: Date | null;
  next_at: Date;
  checks: number;
  detail: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  /** The trace of the approval that queued the dispatch; every step of it continues it (null: none). */
  traceparent: string | null;
}

export function insertDispatch(d: { grantId: string; gateId: string; caseId: string; taskId: string; traceparent: string | null }): Sql {
  return {
    text: `INSERT INTO effect_dispatches (grant_id, gate_id, case_id, task_id, traceparent) VALUES ($1::uuid, $2::uuid, $3::uuid, $4::uuid, $5::text)
           ON CONFLICT (grant_id) DO NOTHING
        RETURNING grant_id`,
    values: [d.grantId, d.gateId, d.caseId, d.taskId, d.traceparent],
  };
}

export function selectDispatchByCall(callId: string): Sql {
  return { text: 'SELECT * FROM effect_dispatches WHERE call_id = $1::uuid ORDER BY created_at LIMIT 1', values: [callId] };
}

/**
 * Claims due rows in `states` whose previous claim (if any) has lapsed. The claim is a lease:
 * the holder renews it while it works; once it lapses another process may take the row.
 */
export function claimDispatches(owner: string, states: readonly string[], limit: number, leaseMs: number): Sql {
  return {
    text: `UPDATE effect_dispatches d
              SET claimed_by = $1::text, claimed_until = now() + make_interval(secs => $4::double precision / 1000), updated_at = now()
             FROM (SELECT grant_id FROM effect_dispatches
                    WHERE state = ANY($2::text[]) AND next_at <= now() AND (claimed_until IS NULL OR claimed_until < now())
                    ORDER BY next_at LIMIT $3::int
                    FOR UPDATE SKIP LOCKED) pick
            WHERE d.grant_id = pick.grant_id
        RETURNING d.*`,
    values: [owner, states, limit, leaseMs],
  };
}

/** Extends the claims `owner` still holds; returns the grant ids it holds. */
export function renewDispatchClaims(owner: string, grantIds: readonly string[], leaseMs: number): Sql {
  return {
    text: `UPDATE effect_dispatches SET claimed_until = now() + make_interval(secs => $3::double precision / 1000)
            WHERE grant_id = ANY($2::uuid[]) AND claimed_by = $1::text
        RETURNING grant_id`,
    values: [owner, grantIds, leaseMs],
  };
}

export interface DispatchMove {
  readonly grantId: string;
  /** The state the row must be in; the move does nothing otherwise. */
  readonly from: readonly string[];
  readonly to: string;
  /** When set, the row must be claimed by this owner. */
  readonly owner?: string;
  /** Keep the claim (the owner works on) instead of clearing it. Default false. */
  readonly keepClaim?: boolean;
  readonly callId?: string;
  readonly attempt?: number;
  readonly waitingKey?: string | null;
  /** Delay of next_at from now (default 0). */
  readonly delayMs?: number;
  /** 'reset' sets checks to 0, 'increment' adds one; default unchanged. */
  readonly checks?: 'reset' | 'increment';
  /** Merged into detail. */
  readonly detail?: Record<string, unknown>;
}

export function moveDispatch(m: DispatchMove): Sql {
  return {
    text: `UPDATE effect_dispatches
              SET state = $3::text,
                  call_id = COALESCE($5::uuid, call_id),
                  attempt = COALESCE($6::int, attempt),
                  waiting_key = $7::text,
                  next_at = now() + make_interval(secs => $8::double precision / 1000),
                  checks = CASE $9::text WHEN 'reset' THEN 0 WHEN 'increment' THEN checks + 1 ELSE checks END,
                  detail = detail || $10::jsonb,
                  claimed_by = CASE WHEN $11::boolean THEN claimed_by ELSE NULL END,
                  claimed_until = CASE WHEN $11::boolean THEN claimed_until ELSE NULL END,
                  updated_at = now()
            WHERE grant_id = $1::uuid AND state = ANY($2::text[]) AND ($4::text IS NULL OR claimed_by = $4::text)
        RETURNING *`,
    values: [
      m.grantId, m.from, m.to, m.owner ?? null, m.callId ?? null, m.attempt ?? null, m.waitingKey ?? null, m.delayMs ?? 0,
      m.checks ?? null, JSON.stringify(m.detail ?? {}), m.keepClaim ?? false,
    ],
  };
}

/**
 * The crash rule: an 'executing' row whose claim lapsed had its intent persisted and may or may
 * not have reached the target. It is NEVER executed again; its call becomes unknown and the
 * row goes to WhatLanded reconciliation.
 */
export function abandonLapsedExecutions(limit: number): Sql {
  return {
    text: `WITH lapsed AS (
             SELECT grant_id, call_id FROM effect_dispatches
              WHERE state = 'executing' AND claimed_until < now()
              ORDER BY claimed_until LIMIT $1::int FOR UPDATE SKIP LOCKED
           ),
           calls AS (
             UPDATE runtime_calls c SET status = 'unknown', outcome_class = 'unknown'
               FROM lapsed WHERE c.id = lapsed.call_id AND c.status = 'intent'
             RETURNING c.id
           )
           UPDATE effect_dispatches d
              SET state = 'reconciling', claimed_by = NULL, claimed_until = NULL, next_at = now(), checks = 0,
                  detail = d.detail || '{"abandoned": true}'::jsonb, updated_at = now()
             FROM lapsed WHERE d.grant_id = lapsed.grant_id
        RETURNING d.*`,
    values: [limit],
  };
}

// ----------------------------------------------------------------------------- effect calls

export interface EffectCallRow {
  id: string;
  task_id: string;
  turn: number;
  ordinal: number;
  status: string;
  tool_name: string | null;
  fence_epoch: number;
  request_paper_id: string | null;
  request_hash: string | null;
  response_paper_id: string | null;
  response_hash: string | null;
  logical_key: string | null;
  outcome_class: string | null;
  effect_attempt: number | null;
  created_at: Date;
  completed_at: Date | null;
}

const CALL_COLUMNS = `id, task_id, turn, ordinal, status, tool_name, fence_epoch, request_paper_id, request_hash, response_paper_id,
  response_hash, logical_key, outcome_class, effect_attempt, created_at, completed_at`;

/**
 * The intent of an effect call, in the executor lane of its task, stamped with the task's
 * current fence epoch. A concurrent insert of the same ordinal or logical key fails with a
 * unique violation (the caller retries or treats it as a duplicate mutation).
 */
export function insertEffectCall(c: {
  id: string;
  taskId: string;
  toolName: string;
  status: 'intent' | 'refused';
  requestPaperId: string | null;
  requestHash: string | null;
  logicalKey: string | null;
  attempt: number | null;
}): Sql {
  return {
    text: `INSERT INTO runtime_calls (id, task_id, turn, ordinal, kind, tool_name, status, fence_epoch, request_paper_id, request_hash,
                                      logical_key, effect_attempt, completed_at)
           SELECT $1::uuid, t.id, ${EXECUTOR_TURN},
                  COALESCE((SELECT max(ordinal) FROM runtime_calls WHERE task_id = t.id AND turn = ${EXECUTOR_TURN}), 0) + 1,
                  'effect', $3::text, $4::text, t.fence_epoch, $5::uuid, $6::text, $7::text, $8::int,
                  CASE WHEN $4::text = 'refused' THEN now() ELSE NULL END
             FROM tasks t WHERE t.id = $2::uuid
        RETURNING ${CALL_COLUMNS}`,
    values: [c.id, c.taskId, c.toolName, c.status, c.requestPaperId, c.requestHash, c.logicalKey, c.attempt],
  };
}

export function selectEffectCall(id: string): Sql {
  return { text: `SELECT ${CALL_COLUMNS} FROM runtime_calls WHERE id = $1::uuid AND kind = 'effect'`, values: [id] };
}

/**
 * Every effect call of a mutation: the key itself and its retry keys (`key#n`), newest first.
 * `left(...)` rather than LIKE: the key may contain LIKE wildcards.
 */
export function selectCallsByMutationKey(key: string): Sql {
  return {
    text: `SELECT ${CALL_COLUMNS} FROM runtime_calls
            WHERE kind = 'effect' AND (logical_key = $1::text OR left(logical_key, length($1::text) + 1) = $1::text || '#')
            ORDER BY created_at DESC, id DESC`,
    values: [key],
  };
}

/** A new attempt of a call whose previous attempt was proven not applied. */
export function reopenEffectCall(id: string, fromAttempt: number): Sql {
  return {
    text: `UPDATE runtime_calls SET status = 'intent', outcome_class = NULL, completed_at = NULL, effect_attempt = effect_attempt + 1
            WHERE id = $1::uuid AND kind = 'effect' AND status = 'failed' AND outcome_class = 'not_applied' AND effect_attempt = $2::int
        RETURNING effect_attempt`,
    values: [id, fromAttempt],
  };
}

/**
 * Records what landed for one attempt. Only an attempt still in doubt (intent or unknown) is
 * updated: whoever records a conclusive answer first wins, a late writer updates nothing.
 */
export function recordEffectCallOutcome(o: {
  id: string;
  attempt: number;
  status: 'completed' | 'failed' | 'unknown' | 'refused';
  outcomeClass: string;
  responsePaperId: string;
  responseHash: string;
}): Sql {
  return {
    text: `UPDATE runtime_calls
              SET status = $3::text, outcome_class = $4::text, response_paper_id = $5::uuid, response_hash = $6::text,
                  completed_at = CASE WHEN $3::text = 'unknown' THEN NULL ELSE now() END
            WHERE id = $1::uuid AND kind = 'effect' AND effect_attempt = $2::int AND status IN ('intent', 'unknown')
        RETURNING id`,
    values: [o.id, o.attempt, o.status, o.outcomeClass, o.responsePaperId, o.responseHash],
  };
}

export function countUnknownEffects(): Sql {
  return { text: `SELECT count(*)::int AS n FROM runtime_calls WHERE kind = 'effect' AND status = 'unknown'` };
}

// ----------------------------------------------------------------------------- cases, tasks

export function selectCaseStop(caseId: string): Sql {
  return { text: 'SELECT id, customer, stop_mode FROM cases WHERE id = $1::uuid', values: [caseId] };
}

export function setCaseStopMode(caseId: string, mode: 'hard' | 'soft' | null): Sql {
  return { text: 'UPDATE cases SET stop_mode = $2::text, row_version = row_version + 1, updated_at = now() WHERE id = $1::uuid RETURNING id', values: [caseId, mode] };
}

export function selectTaskForEffect(taskId: string): Sql {
  return {
    text: 'SELECT id, case_id, state, cancel_requested, fence_epoch FROM tasks WHERE id = $1::uuid',
    values: [taskId],
  };
}

/** Age of the oldest parked task, and how many are parked, per park reason, on the database clock. */
export function parkedAges(): Sql {
  return {
    text: `SELECT park_reason, EXTRACT(EPOCH FROM now() - min(COALESCE(parked_at, updated_at)))::float8 AS age_seconds, count(*)::int AS parked
             FROM tasks WHERE state = 'parked' GROUP BY park_reason`,
  };
}

/**
 * Open gates per kind and how long they have waited for their decisions (database clock):
 * the median, 90th and 99th percentile and the oldest wait.
 */
export function openGateWaits(): Sql {
  return {
    text: `SELECT kind, count(*)::int AS open,
                  percentile_cont(0.5) WITHIN GROUP (ORDER BY age)::float8 AS p50,
                  percentile_cont(0.9) WITHIN GROUP (ORDER BY age)::float8 AS p90,
                  percentile_cont(0.99) WITHIN GROUP (ORDER BY age)::float8 AS p99,
                  max(age)::float8 AS oldest
             FROM (SELECT kind, EXTRACT(EPOCH FROM now() - created_at)::float8 AS age FROM gates WHERE state = 'open') open_gates
            GROUP BY kind`,
  };
}

// ----------------------------------------------------------------------------- outbox

/**
 * Outbox rows claimed by a relay whose claim lapsed more than `graceMs` ago and that were never
 * published: the relay died or lost its broker. Clearing the claim hands them to any relay now.
 */
export function releaseStaleOutbox(graceMs: number, limit: number): Sql {
  return {
    text: `WITH stale AS (
             SELECT seq FROM outbox_messages
              WHERE published_at IS NULL AND claimed_by IS NOT NULL
                AND claimed_until < now() - make_interval(secs => $1::double precision / 1000)
              ORDER BY seq LIMIT $2::int FOR UPDATE SKIP LOCKED
           )
           UPDATE outbox_messages o SET claimed_by = NULL, claimed_until = NULL FROM stale WHERE o.seq = stale.seq
        RETURNING o.seq`,
    values: [graceMs, limit],
  };
}
