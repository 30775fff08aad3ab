/**
 * GATES and DECISIONS statements (DESIGN §6, seed 004 §5). A gate is opened for one packet
 * digest and lists every decision it needs; each decision is one row, bound to the digest it
 * was given on. Expiry compares with the DATABASE clock.
 */
import type { GateState, Verdict } from '@everdict/contracts';
import type { Sql } from '../db.js';

/** One decision a gate needs, and the role that may give it. */
export interface RequiredDecision {
  readonly decision: string;
  readonly role: string;
}

export interface GateRow {
  id: string;
  case_id: string;
  task_id: string;
  packet_digest: string;
  operation: string;
  effect_class: string;
  required_decisions: RequiredDecision[];
  state: GateState;
  expires_at: Date | null;
  created_at: Date;
  decided_at: Date | null;
  packet_paper_id: string | null;
  packet_revision: number | null;
  mutation_key: string | null;
  propose_call_id: string | null;
  impact_keys: string[];
  summary: string | null;
  reason: string | null;
  /** The trace of the request that opened the gate (null: none). */
  traceparent: string | null;
  /** From the case: the principal's customer scope is checked against it. */
  customer: string;
}

export interface NewGate {
  readonly id: string;
  readonly caseId: string;
  readonly taskId: string;
  readonly packetDigest: string;
  readonly operation: string;
  readonly effectClass: string;
  readonly requiredDecisions: readonly RequiredDecision[];
  readonly state: 'open' | 'rejected';
  /** Absolute expiry, or null to use `ttlMs` from the database clock. */
  readonly expiresAt: string | null;
  readonly ttlMs: number;
  readonly packetPaperId: string | null;
  readonly packetRevision: number | null;
  readonly mutationKey: string | null;
  readonly proposeCallId: string | null;
  readonly impactKeys: readonly string[];
  readonly summary: string | null;
  readonly reason: string | null;
  /** The trace of the request that opened the gate; its decision continues it (null: none). */
  readonly traceparent?: string | null;
}

const GATE_COLUMNS = `g.id, g.case_id, g.task_id, g.packet_digest, g.operation, g.effect_class, g.required_decisions, g.state,
  g.expires_at, g.created_at, g.decided_at, g.packet_paper_id, g.packet_revision, g.mutation_key, g.propose_call_id,
  g.impact_keys, g.summary, g.reason, g.traceparent, c.customer`;

/** A gate id seen before is left alone (a redelivered request never reopens a decided gate). */
export function insertGate(g: NewGate): Sql {
  return {
    text: `INSERT INTO gates (id, case_id, task_id, packet_digest, operation, effect_class, required_decisions, state, expires_at,
                              decided_at, packet_paper_id, packet_revision, mutation_key, propose_call_id, impact_keys, summary, reason, traceparent)
           VALUES ($1::uuid, $2::uuid, $3::uuid, $4::text, $5::text, $6::text, $7::jsonb, $8::text,
                   COALESCE($9::timestamptz, now() + make_interval(secs => $10::double precision / 1000)),
                   CASE WHEN $8::text = 'open' THEN NULL ELSE now() END,
                   $11::uuid, $12::int, $13::text, $14::uuid, $15::jsonb, $16::text, $17::text, $18::text)
           ON CONFLICT (id) DO NOTHING
           RETURNING id`,
    values: [
      g.id, g.caseId, g.taskId, g.packetDigest, g.operation, g.effectClass, JSON.stringify(g.requiredDecisions), g.state,
      g.expiresAt, g.ttlMs, g.packetPaperId, g.packetRevision, g.mutationKey, g.proposeCallId, JSON.stringify(g.impactKeys),
      g.summary, g.reason, g.traceparent ?? null,
    ],
  };
}

export function selectGate(id: string, lock = false): Sql {
  return {
    text: `SELECT ${GATE_COLUMNS} FROM gates g JOIN cases c ON c.id = g.case_id WHERE g.id = $1::uuid${lock ? ' FOR UPDATE OF g' : ''}`,
    values: [id],
  };
}

/** Gates in `state`, oldest first, whose required decisions name one of `roles`. */
export function selectGatesForRoles(state: GateState, roles: readonly string[], limit: number): Sql {
  return {
    text: `SELECT ${GATE_COLUMNS} FROM gates g JOIN cases c ON c.id = g.case_id
            WHERE g.state = $1::text
              AND EXISTS (SELECT 1 FROM jsonb_array_elements(g.required_decisions) d WHERE d->>'role' = ANY($2::text[]))
            ORDER BY g.created_at, g.id
            LIMIT $3::int`,
    values: [state, roles, limit],
  };
}

export interface DecisionRow {
  id: string;
  gate_id: string;
  decision: string;
  verdict: Verdict;
  principal: string;
  role: string;
  digest: string;
  reason: string | null;
  created_at: Date;
}

/** One decision, once: a second answer to the same decision of the same gate inserts nothing. */
export function insertDecision(d: { id: string; gateId: string; decision: string; verdict: Verdict; principal: string; role: string; digest: string; reason: string | null }): Sql {
  return {
    text: `INSERT INTO decisions (id, gate_id, decision, verdict, principal, role, digest, reason)
           VALUES ($1::uuid, $2::uuid, $3::text, $4::text, $5::text, $6::text, $7::text, $8::text)
           ON CONFLICT (gate_id, decision) DO NOTHING
           RETURNING id`,
    values: [d.id, d.gateId, d.decision, d.verdict, d.principal, d.role, d.digest, d.reason],
  };
}

export function selectDecisions(gateIds: readonly string[]): Sql {
  return {
    text: 'SELECT * FROM decisions WHERE gate_id = ANY($1::uuid[]) ORDER BY created_at, id',
    values: [gateIds],
  };
}

/** Closes an open gate; nothing happens to a gate that is no longer open. */
export function closeGate(id: string, state: Exclude<GateState, 'open'>, reason: string | null): Sql {
  return {
    text: `UPDATE gates SET state = $2::text, decided_at = now(), reason = COALESCE($3::text, reason)
            WHERE id = $1::uuid AND (state = 'open' OR ($2::text = 'revoked' AND state = 'approved'))
        RETURNING id`,
    values: [id, state, reason],
  };
}

/** Open gates past their expiry on the database clock, locked for this unit of work. */
export function expireDueGates(limit: number): Sql {
  return {
    text: `WITH due AS (
             SELECT id FROM gates WHERE state = 'open' AND expires_at <= now()
              ORDER BY expires_at LIMIT $1::int FOR UPDATE SKIP LOCKED
           )
           UPDATE gates g SET state = 'expired', decided_at = now(), reason = 'the gate expired before every decision was given'
             FROM due WHERE g.id = due.id
        RETURNING g.id, g.case_id, g.task_id, g.packet_digest`,
    values: [limit],
  };
}

/** Whether the gate's expiry has passed on the database clock. */
export function gateExpired(id: string): Sql {
  return { text: 'SELECT (expires_at IS NOT NULL AND expires_at <= now()) AS expired FROM gates WHERE id = $1::uuid', values: [id] };
}
