/**
 * Reads of persisted assignments a receiver checks a message against (seed 004 §4: a claimed
 * sender field is not authentication). Every read runs in the delivery's unit of work, so the
 * check and the state change it guards see the same rows. The decisions themselves are pure
 * (contracts' assignments.ts); these only fetch their facts.
 */
import type { Queryable } from './db.js';
import { insertDeadLetter } from './sql/inbox.js';
import type { UnitOfWork } from './unitOfWork.js';

/** A gate as the deciding receivers need it, with every recorded decision. */
export interface GateRecord {
  readonly id: string;
  readonly case_id: string;
  readonly task_id: string;
  readonly packet_digest: string;
  readonly state: string;
  readonly required_decisions: readonly { decision: string; role?: string }[];
  readonly reason: string | null;
  readonly decisions: readonly { decision: string; verdict: string; digest: string }[];
}

export async function loadGateRecord(q: Queryable, gateId: string): Promise<GateRecord | undefined> {
  const gate = (
    await q.query<Omit<GateRecord, 'decisions'>>({
      text: `SELECT id, case_id, task_id, packet_digest, state, required_decisions, reason FROM gates WHERE id = $1::uuid`,
      values: [gateId],
    })
  ).rows[0];
  if (!gate) return undefined;
  const decisions = (
    await q.query<{ decision: string; verdict: string; digest: string }>({
      text: `SELECT decision, verdict, digest FROM decisions WHERE gate_id = $1::uuid ORDER BY created_at, id`,
      values: [gateId],
    })
  ).rows;
  return { ...gate, decisions };
}

/**
 * Whether the coordinator journalled a dispatch of exactly this call under this grant for this
 * task and case: the dispatch row names the call (it reached its intent) and the call is an
 * effect call of the task. A dispatch that found its mutation journalled already reports the
 * earlier call (detail.duplicateOf) under that call's own grant.
 */
export async function journalledDispatch(q: Queryable, m: { caseId: string; taskId: string; callId: string; grantId: string }): Promise<boolean> {
  const r = await q.query({
    text: `SELECT 1
             FROM effect_dispatches d
             JOIN runtime_calls c ON c.id = $3::uuid AND c.kind = 'effect'
             JOIN effect_dispatches o ON o.grant_id = $4::uuid AND o.call_id = c.id
            WHERE d.case_id = $1::uuid AND d.task_id = $2::uuid
              AND (d.grant_id = $4::uuid AND d.call_id = $3::uuid OR d.detail->>'duplicateOf' = $3::text)
            LIMIT 1`,
    values: [m.caseId, m.taskId, m.callId, m.grantId],
  });
  return r.rows.length > 0;
}

/**
 * Whether the case's ledger holds a record of `kind` whose body contains `match` (jsonb
 * containment): how intake's operator actions are recorded, in the unit of work that sent the
 * message they caused.
 */
export async function hasLedgerRecord(q: Queryable, caseId: string, kind: string, match: Readonly<Record<string, unknown>>): Promise<boolean> {
  const r = await q.query({
    text: `SELECT 1 FROM ledger WHERE case_id = $1::uuid AND kind = $2::text AND body @> $3::jsonb LIMIT 1`,
    values: [caseId, kind, JSON.stringify(match)],
  });
  return r.rows.length > 0;
}

/** The other open gate of the same packet in the case, if any (one packet, at most one open gate). */
export async function openGateOfPacket(q: Queryable, caseId: string, packetDigest: string, exceptGateId: string): Promise<string | undefined> {
  const r = await q.query<{ id: string }>({
    text: `SELECT id FROM gates WHERE case_id = $1::uuid AND packet_digest = $2::text AND state = 'open' AND id <> $3::uuid LIMIT 1`,
    values: [caseId, packetDigest, exceptGateId],
  });
  return r.rows[0]?.id;
}

/** A paper's case and name (packet papers are named `packets/<gateId>` by the proposing turn). */
export async function paperIdentity(q: Queryable, paperId: string): Promise<{ case_id: string; name: string } | undefined> {
  return (await q.query<{ case_id: string; name: string }>({ text: `SELECT case_id, name FROM papers WHERE id = $1::uuid`, values: [paperId] })).rows[0];
}

/** Records a receiver's refusal in dead_letters inside the delivery's unit of work (ids only, never content). */
export async function recordRefusalIn(uow: UnitOfWork, d: { consumer: string; messageId: string; type: string; reason: string; detail: string; payloadHash: string }): Promise<void> {
  await uow.query(insertDeadLetter(d));
}

/** What stamping a message from a task needs of its row. */
export interface ParkedIdentity {
  readonly id: string;
  readonly case_id: string;
  readonly parent_id: string | null;
  readonly ancestry: string[];
  readonly profile: string;
  readonly profile_version: string;
}

/**
 * Parks a task of the case `capability_gap` without its lease (a message for it could not be
 * understood): the fence epoch moves on, so a worker running it can no longer write, dispatch or
 * complete; nothing wakes it mechanically. A task that has ended is left alone (undefined).
 */
export async function parkCapabilityGap(uow: UnitOfWork, taskId: string, caseId: string, detail: Record<string, unknown>): Promise<ParkedIdentity | undefined> {
  const r = await uow.query<ParkedIdentity>({
    text: `UPDATE tasks
              SET state = 'parked', park_reason = 'capability_gap', park_detail = $3::jsonb, parked_at = now(), wake_at = NULL,
                  fence_epoch = fence_epoch + 1, row_version = row_version + 1, lease_owner = NULL, lease_until = NULL, updated_at = now()
            WHERE id = $1::uuid AND case_id = $2::uuid AND state IN ('open', 'running', 'parked')
        RETURNING id, case_id, parent_id, ancestry::text[] AS ancestry, profile, profile_version`,
    values: [taskId, caseId, JSON.stringify(detail)],
  });
  return r.rows[0];
}
