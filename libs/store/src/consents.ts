/**
 * Consent gates (K3): a GATES row of kind `consent` plus the CONSENTS row that says what exactly
 * it consents to — one journal call (task + call id) of one tool with its canonical arguments
 * and destination. The gate's digest is the digest of that call, so the write gates' decision
 * machinery (role checks, digest binding, expiry) decides it unchanged.
 *
 * Invariants:
 * - one consent gate per call id (UNIQUE call_id): a resumed turn finds the gate its call
 *   parked on instead of opening a second one;
 * - an approved consent admits only its own call id; `consumed_at` records that it did. A second
 *   call of the same tool and arguments has another call id and needs its own consent.
 */
import type { GateState } from '@everdict/contracts';
import type { Queryable, Sql } from './db.js';
import type { UnitOfWork } from './unitOfWork.js';
import type { RequiredDecision } from './sql/gates.js';

export interface NewConsentGate {
  readonly gateId: string;
  readonly caseId: string;
  readonly taskId: string;
  readonly callId: string;
  /** `sha256:` of the canonical {tool, arguments, destination}. */
  readonly digest: string;
  readonly tool: string;
  readonly arguments: Readonly<Record<string, unknown>>;
  readonly destination: Readonly<Record<string, unknown>>;
  readonly rule: string;
  readonly decisions: readonly RequiredDecision[];
  readonly ttlMs: number;
  readonly summary: string;
}

/** A consent gate as the hook and the gate service read it. */
export interface ConsentRow {
  gate_id: string;
  case_id: string;
  task_id: string;
  call_id: string;
  state: GateState;
  digest: string;
  tool_name: string;
  arguments: Record<string, unknown>;
  destination: Record<string, unknown>;
  rule: string;
  reason: string | null;
  expires_at: Date | null;
  consumed_at: Date | null;
}

const CONSENT_COLUMNS = `k.gate_id, g.case_id, k.task_id, k.call_id, g.state, g.packet_digest AS digest, k.tool_name, k.arguments,
  k.destination, k.rule, g.reason, g.expires_at, k.consumed_at`;

function insertConsentGate(c: NewConsentGate): Sql {
  return {
    name: 'consents_insert_gate',
    text: `INSERT INTO gates (id, case_id, task_id, packet_digest, operation, effect_class, required_decisions, state, expires_at, summary, kind)
           VALUES ($1::uuid, $2::uuid, $3::uuid, $4::text, $5::text, 'consent', $6::jsonb, 'open',
                   now() + make_interval(secs => $7::double precision / 1000), $8::text, 'consent')
           ON CONFLICT (id) DO NOTHING
           RETURNING id`,
    values: [c.gateId, c.caseId, c.taskId, c.digest, c.tool, JSON.stringify(c.decisions), c.ttlMs, c.summary],
  };
}

function insertConsent(c: NewConsentGate): Sql {
  return {
    name: 'consents_insert',
    text: `INSERT INTO consents (gate_id, task_id, call_id, tool_name, arguments, destination, rule)
           VALUES ($1::uuid, $2::uuid, $3::uuid, $4::text, $5::jsonb, $6::jsonb, $7::text)
           ON CONFLICT DO NOTHING
           RETURNING gate_id`,
    values: [c.gateId, c.taskId, c.callId, c.tool, JSON.stringify(c.arguments), JSON.stringify(c.destination), c.rule],
  };
}

function selectConsentOfCall(taskId: string, callId: string): Sql {
  return {
    name: 'consents_of_call',
    text: `SELECT ${CONSENT_COLUMNS} FROM consents k JOIN gates g ON g.id = k.gate_id WHERE k.task_id = $1::uuid AND k.call_id = $2::uuid`,
    values: [taskId, callId],
  };
}

function selectConsentOfGate(gateId: string): Sql {
  return {
    name: 'consents_of_gate',
    text: `SELECT ${CONSENT_COLUMNS} FROM consents k JOIN gates g ON g.id = k.gate_id WHERE k.gate_id = $1::uuid`,
    values: [gateId],
  };
}

/** Only an approved consent, only for its own call; a second consumption by the same call is a no-op. */
function consumeStatement(gateId: string, callId: string): Sql {
  return {
    name: 'consents_consume',
    text: `UPDATE consents k SET consumed_at = COALESCE(k.consumed_at, now())
             FROM gates g
            WHERE k.gate_id = $1::uuid AND k.call_id = $2::uuid AND g.id = k.gate_id AND g.state = 'approved'
        RETURNING k.gate_id`,
    values: [gateId, callId],
  };
}

/**
 * Opens the consent gate of one call, in the unit of work that parks the task on it (the caller
 * holds the task's fence). False when the call already has its gate (nothing is changed).
 */
export async function openConsentGate(uow: UnitOfWork, c: NewConsentGate): Promise<boolean> {
  if ((await uow.query(insertConsentGate(c))).rowCount !== 1) return false;
  return (await uow.query(insertConsent(c))).rowCount === 1;
}

/** The consent gate a call parked on, if it has one. */
export async function consentOfCall(q: Queryable, taskId: string, callId: string): Promise<ConsentRow | undefined> {
  return (await q.query<ConsentRow>(selectConsentOfCall(taskId, callId))).rows[0];
}

/** The consent a gate decides, or undefined for a write gate. */
export async function consentOfGate(q: Queryable, gateId: string): Promise<ConsentRow | undefined> {
  return (await q.query<ConsentRow>(selectConsentOfGate(gateId))).rows[0];
}

/** Marks the approved consent used by its call; false when it is not approved or not this call's. */
export async function consumeConsent(q: Queryable, gateId: string, callId: string): Promise<boolean> {
  return (await q.query(consumeStatement(gateId, callId))).rowCount === 1;
}
