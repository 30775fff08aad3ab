/**
 * Reads the operator console needs beyond the case view and the case list (intake.ts): a
 * case's papers with their provenance, its gates' required roles, and the exceptions an operator
 * acts on (parked tasks by class and age, unknown effect outcomes, restore failures,
 * consumer refusals). Every read takes the principal's `customers` (null = every customer) and
 * filters in SQL, so no row of another customer ever leaves the database.
 */
import type { Queryable } from './db.js';
export interface CasePaperRow {
  id: string;
  kind: string;
  name: string;
  head_revision: number;
  created_at: Date;
  schema_id: string | null;
  content_hash: string | null;
  size_bytes: number | null;
  revised_at: Date | null;
  /** The journal calls that read or wrote the paper: [{callId, taskId, kind, toolName, as}]. */
  calls: { callId: string; taskId: string; kind: string; toolName: string | null; as: 'request' | 'response' }[];
  /** Gates whose packet is this paper. */
  gate_ids: string[];
}

/** A case's papers with their head revision and where they came from (never their bytes). */
export async function loadCasePapers(q: Queryable, caseId: string): Promise<CasePaperRow[]> {
  const { rows } = await q.query<CasePaperRow>({
    text: `SELECT p.id, p.kind, p.name, p.head_revision, p.created_at,
                  r.schema_id, r.content_hash, r.size_bytes, r.created_at AS revised_at,
                  COALESCE((SELECT jsonb_agg(jsonb_build_object('callId', c.id, 'taskId', c.task_id, 'kind', c.kind, 'toolName', c.tool_name,
                                                                'as', CASE WHEN c.response_paper_id = p.id THEN 'response' ELSE 'request' END)
                                             ORDER BY c.created_at)
                              FROM runtime_calls c WHERE c.request_paper_id = p.id OR c.response_paper_id = p.id), '[]'::jsonb) AS calls,
                  COALESCE((SELECT array_agg(g.id::text ORDER BY g.created_at) FROM gates g WHERE g.packet_paper_id = p.id), '{}') AS gate_ids
             FROM papers p
             LEFT JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
            WHERE p.case_id = $1::uuid
            ORDER BY p.created_at, p.id`,
    values: [caseId],
  });
  return rows;
}

export interface GateRolesRow {
  id: string;
  required_decisions: { decision: string; role: string }[];
  decisions: { decision: string; verdict: string; principal: string; role: string; at: string }[];
  expires_at: Date | null;
}

/** Per gate of the case: the decisions it requires (with their roles) and those recorded. */
export async function loadCaseGateRoles(q: Queryable, caseId: string): Promise<GateRolesRow[]> {
  const { rows } = await q.query<GateRolesRow>({
    text: `SELECT g.id, g.required_decisions, g.expires_at,
                  COALESCE((SELECT jsonb_agg(jsonb_build_object('decision', d.decision, 'verdict', d.verdict, 'principal', d.principal, 'role', d.role, 'at', d.created_at)
                                             ORDER BY d.created_at)
                              FROM decisions d WHERE d.gate_id = g.id), '[]'::jsonb) AS decisions
             FROM gates g WHERE g.case_id = $1::uuid ORDER BY g.created_at, g.id`,
    values: [caseId],
  });
  return rows;
}

// ------------------------------------------------------------------------------- exceptions

export interface ParkedClassRow {
  park_reason: string;
  tasks: number;
  oldest_parked_at: Date | null;
  /** Up to 20 oldest of the class: [{taskId, caseId, customer, parkedAt}]. */
  oldest: { taskId: string; caseId: string; customer: string; parkedAt: string | null }[];
}

export async function loadParkedByClass(q: Queryable, customers: readonly string[] | null): Promise<ParkedClassRow[]> {
  const { rows } = await q.query<ParkedClassRow>({
    text: `WITH parked AS (
             SELECT t.id, t.case_id, c.customer, t.park_reason, t.parked_at,
                    row_number() OVER (PARTITION BY t.park_reason ORDER BY t.parked_at NULLS LAST, t.id) AS n
               FROM tasks t JOIN cases c ON c.id = t.case_id
              WHERE t.state = 'parked' AND ($1::text[] IS NULL OR c.customer = ANY($1::text[])))
           SELECT park_reason, count(*)::int AS tasks, min(parked_at) AS oldest_parked_at,
                  jsonb_agg(jsonb_build_object('taskId', id, 'caseId', case_id, 'customer', customer, 'parkedAt', parked_at) ORDER BY n)
                    FILTER (WHERE n <= 20) AS oldest
             FROM parked GROUP BY park_reason ORDER BY park_reason`,
    values: [customers],
  });
  return rows.map((r) => ({ ...r, oldest: r.oldest ?? [] }));
}

export interface UnknownOutcomeRow {
  call_id: string;
  case_id: string;
  task_id: string;
  operation: string | null;
  status: string;
  created_at: Date;
}

/**
 * Effect calls whose outcome is not known: `unknown`, or an `intent` older than `intentAgeMs`
 * (a dispatch that never reported back). The reconciler is asking the connector; an operator
 * may record the outcome (POST /v1/effects/:callId/outcome).
 */
export async function loadUnknownOutcomes(q: Queryable, customers: readonly string[] | null, intentAgeMs: number, limit = 200): Promise<UnknownOutcomeRow[]> {
  const { rows } = await q.query<UnknownOutcomeRow>({
    text: `SELECT rc.id AS call_id, t.case_id, rc.task_id, rc.tool_name AS operation, rc.status, rc.created_at
             FROM runtime_calls rc JOIN tasks t ON t.id = rc.task_id JOIN cases c ON c.id = t.case_id
            WHERE rc.kind = 'effect'
              AND (rc.status = 'unknown' OR (rc.status = 'intent' AND rc.created_at < now() - $2::int * interval '1 millisecond'))
              AND ($1::text[] IS NULL OR c.customer = ANY($1::text[]))
            ORDER BY rc.created_at LIMIT $3::int`,
    values: [customers, intentAgeMs, limit],
  });
  return rows;
}

export interface RestoreFailureRow {
  task_id: string;
  case_id: string;
  reason: string | null;
  error: string | null;
  parked_at: Date | null;
}

/** Tasks parked because their durable state could not be restored (turn-worker activation). */
export async function loadRestoreFailures(q: Queryable, customers: readonly string[] | null, limit = 200): Promise<RestoreFailureRow[]> {
  const { rows } = await q.query<RestoreFailureRow>({
    text: `SELECT t.id AS task_id, t.case_id, t.park_detail->>'reason' AS reason, t.park_detail->>'error' AS error, t.parked_at
             FROM tasks t JOIN cases c ON c.id = t.case_id
            WHERE t.state = 'parked' AND t.park_detail->>'kind' = 'restore_failed'
              AND ($1::text[] IS NULL OR c.customer = ANY($1::text[]))
            ORDER BY t.parked_at NULLS LAST, t.id LIMIT $2::int`,
    values: [customers, limit],
  });
  return rows;
}

export interface RefusalRow {
  seq: number;
  consumer: string;
  message_id: string | null;
  type: string | null;
  reason: string;
  detail: string;
  recorded_at: Date;
}

/** The consumers' own record of what they refused and dead-lettered (dead_letters, newest first). */
export async function loadRecordedRefusals(q: Queryable, limit = 200): Promise<RefusalRow[]> {
  const { rows } = await q.query<RefusalRow>({
    text: 'SELECT seq, consumer, message_id, type, reason, detail, recorded_at FROM dead_letters ORDER BY seq DESC LIMIT $1::int',
    values: [limit],
  });
  return rows;
}

/** Customers of the given cases (for filtering broker-held messages by ownership). */
export async function customersOfCases(q: Queryable, caseIds: readonly string[]): Promise<Map<string, string>> {
  if (caseIds.length === 0) return new Map();
  const { rows } = await q.query<{ id: string; customer: string }>({ text: 'SELECT id::text AS id, customer FROM cases WHERE id = ANY($1::uuid[])', values: [caseIds] });
  return new Map(rows.map((r) => [r.id, r.customer]));
}

/** Workers holding a live task lease right now, with how many each holds (a cheap liveness signal). */
export async function loadLeaseHolders(q: Queryable): Promise<{ owner: string; tasks: number; until: Date }[]> {
  const { rows } = await q.query<{ owner: string; tasks: number; until: Date }>({
    text: `SELECT lease_owner AS owner, count(*)::int AS tasks, max(lease_until) AS until
             FROM tasks WHERE state = 'running' AND lease_owner IS NOT NULL AND lease_until > now()
            GROUP BY lease_owner ORDER BY lease_owner`,
  });
  return rows;
}
