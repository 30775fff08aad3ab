/**
 * The case state (seed 004 §11.1 state table) as ONE statement: it reads the committed task,
 * gate, dispatch, call and plan records of a case, derives the state, and writes it only when
 * it changed, returning what it was and what it is now. It is the only writer of
 * `cases.state`; callers run it in the unit of work of the transition that changed a record,
 * after that change, with the ledger head and the case row locked (lockCaseForState) so two
 * refreshes of one case serialise and the later one sees the earlier one's records.
 *
 * Precedence, first match wins:
 *   closed        the customer closed it (cases.closed_at; only the customer closes, and only
 *                 a reply that reopens the case clears it)
 *   cancelled     a hard stop on the case, or the root task cancelled
 *   opened        no task yet, or none has ever been claimed
 *   resolved      the root done, nothing unreconciled (below) and the customer told: the root
 *                 has a `customer_notifications` row (the channel adapter's recorded delivery)
 *   parked        (class `telling_customer`) verified, the customer not told yet
 *   parked        (class `unreconciled`) the root finished but something is not verified
 *   at_gate       a gate of the case is open
 *   held          approved work waits for execution: a grant issued or reserved, or its
 *                 dispatch not yet settled
 *   running       a task is running, or open again after it ran (between activations), or
 *                 a reopened case's new root waits for its first claim
 *   parked        every live task waits: the reason class of the latest non-`children` park
 *                 (a parent waiting on children shows what its children wait for)
 * The unreconciled checks and `told` only decide a finished root's state, so they are evaluated
 * only once the root is done or failed (a CASE runs its subquery lazily): a claim, a park or a
 * gate of a live case does not pay for them.
 * Unreconciled (§11.3, mechanically checkable part): an effect call whose outcome is in doubt
 * (intent/unknown) or not applied (failed/refused) with no applied call under the same logical
 * key, an effect whose post-check assertions did not hold (its `effect_postcheck` record), an
 * open gate, a proposed write whose gate was refused, rejected, expired or revoked and that no
 * later gate of the same mutation applied, held approved work, a root plan step neither done
 * (done is projected only after its assertion passed) nor dropped, or the root failed. The
 * `case_state` record of such a case lists what (`why`); it stays parked, never resolved.
 * The root is the case's CURRENT root: the newest task without a parent (a reply to a resolved
 * or closed case reopens it with a new root; services/intake/src/threading.ts).
 * The derivation's steps (f, w, d) are MATERIALIZED: each is one row that the next step reads
 * through several expressions, and a CTE read once is inlined by Postgres, which copies every
 * subquery into each expression that names its column (the derivation then runs many times
 * over in one statement). Materialized, each count is computed once per refresh.
 */
import type { Sql } from '../db.js';

/**
 * Takes the ledger head lock, then the case row lock: the order every case-row writer keeps.
 * Returns the head it locked, so a `case_state` record appends without locking it again.
 */
export function lockCaseForState(caseId: string): Sql {
  return {
    name: 'ev_lock_case_for_state_v2',
    text: `SELECT c.state, c.state_reason, h.seq AS head_seq, h.hash AS head_hash FROM ledger_heads h JOIN cases c ON c.id = h.case_id WHERE h.case_id = $1::uuid FOR UPDATE OF h, c`,
    values: [caseId],
  };
}

/**
 * lockCaseForState for several cases in ONE statement: the rows are locked in case-id order
 * (the lock is taken after the sort), the order a batch of refreshes keeps so two batches
 * cannot deadlock.
 */
export function lockCasesForState(caseIds: readonly string[]): Sql {
  return {
    name: 'ev_lock_cases_for_state',
    text: `SELECT h.case_id, c.state, c.state_reason, h.seq AS head_seq, h.hash AS head_hash
             FROM ledger_heads h JOIN cases c ON c.id = h.case_id
            WHERE h.case_id = ANY($1::uuid[])
            ORDER BY h.case_id
              FOR UPDATE OF h, c`,
    values: [[...caseIds]],
  };
}

export interface LockedCaseState {
  state: string;
  state_reason: string | null;
  head_seq: number;
  head_hash: string;
}

export interface CaseStateChange {
  case_id: string;
  from_state: string;
  to_state: string;
  from_reason: string | null;
  to_reason: string | null;
  why: string[];
  changed: boolean;
}

/**
 * The derivation of one case (the chain c … r the header describes) for the case whose id is
 * the SQL expression `id`: both statements below are this one text.
 */
function derivation(id: string): string {
  return `c AS (SELECT id, state, state_reason, stop_mode, closed_at FROM cases WHERE id = ${id}),
           root AS (SELECT id, state FROM tasks WHERE case_id = ${id} AND parent_id IS NULL ORDER BY created_at DESC, id DESC LIMIT 1),
           f AS MATERIALIZED (
             SELECT (SELECT state FROM root) AS root_state,
                    EXISTS (SELECT 1 FROM tasks t WHERE t.case_id = ${id} AND t.fence_epoch > 0) AS ever_ran,
                    EXISTS (SELECT 1 FROM tasks t WHERE t.case_id = ${id} AND (t.state = 'running' OR (t.state = 'open' AND t.fence_epoch > 0))) AS active,
                    (SELECT t.park_reason FROM tasks t WHERE t.case_id = ${id} AND t.state = 'parked'
                      ORDER BY (t.park_reason = 'children'), t.parked_at DESC NULLS LAST, t.id LIMIT 1) AS park_reason,
                    (SELECT count(*)::int FROM gates g WHERE g.case_id = ${id} AND g.state = 'open') AS open_gates,
                    (SELECT count(*)::int FROM grants g WHERE g.case_id = ${id}
                        AND NOT EXISTS (SELECT 1 FROM effect_dispatches d WHERE d.grant_id = g.id AND d.state IN ('settled', 'refused'))
                        AND (g.state IN ('issued', 'reserved') OR EXISTS (SELECT 1 FROM effect_dispatches d WHERE d.grant_id = g.id))) AS held,
                    (CASE WHEN (SELECT state FROM root) IN ('done', 'failed') THEN (SELECT count(*)::int FROM runtime_calls rc JOIN tasks t ON t.id = rc.task_id
                      WHERE t.case_id = ${id} AND rc.kind = 'effect' AND rc.status IN ('intent', 'unknown')) ELSE 0 END) AS in_doubt,
                    (CASE WHEN (SELECT state FROM root) IN ('done', 'failed') THEN (SELECT count(*)::int FROM runtime_calls rc JOIN tasks t ON t.id = rc.task_id
                      WHERE t.case_id = ${id} AND rc.kind = 'effect' AND rc.status IN ('failed', 'refused')
                        AND NOT EXISTS (SELECT 1 FROM runtime_calls ok JOIN tasks ot ON ot.id = ok.task_id
                                         WHERE ot.case_id = ${id} AND ok.kind = 'effect' AND ok.status = 'completed'
                                           AND split_part(ok.logical_key, '#', 1) = split_part(rc.logical_key, '#', 1))) ELSE 0 END) AS not_applied,
                    (CASE WHEN (SELECT state FROM root) IN ('done', 'failed') THEN (SELECT count(*)::int FROM ledger l WHERE l.case_id = ${id} AND l.kind = 'effect_postcheck' AND l.body->>'status' <> 'holds'
                        AND NOT EXISTS (SELECT 1 FROM ledger ok WHERE ok.case_id = ${id} AND ok.kind = 'effect_postcheck'
                                         AND ok.body->>'status' = 'holds' AND ok.body->>'callId' = l.body->>'callId' AND ok.seq > l.seq)) ELSE 0 END) AS unasserted,
                    (CASE WHEN (SELECT state FROM root) IN ('done', 'failed') THEN (SELECT count(*)::int FROM gates g WHERE g.case_id = ${id} AND g.mutation_key IS NOT NULL AND g.state IN ('rejected', 'expired', 'revoked')
                        AND NOT EXISTS (SELECT 1 FROM gates g2 JOIN effect_dispatches d ON d.gate_id = g2.id JOIN runtime_calls c ON c.id = d.call_id
                                         WHERE g2.case_id = ${id} AND g2.mutation_key = g.mutation_key AND c.status = 'completed')) ELSE 0 END) AS unapproved,
                    (CASE WHEN (SELECT state FROM root) IN ('done', 'failed') THEN (SELECT count(*)::int FROM plan_steps s WHERE s.task_id = (SELECT id FROM root) AND s.status NOT IN ('done', 'dropped')) ELSE 0 END) AS open_steps,
                    (SELECT state FROM root) IN ('done', 'failed') AND EXISTS (SELECT 1 FROM customer_notifications n WHERE n.root_task_id = (SELECT id FROM root)) AS told
           ),
           w AS MATERIALIZED (
             SELECT array_remove(ARRAY[
                      CASE WHEN f.root_state = 'failed' THEN 'the root task failed' END,
                      CASE WHEN f.in_doubt > 0 THEN f.in_doubt || ' effect outcome(s) in doubt' END,
                      CASE WHEN f.not_applied > 0 THEN f.not_applied || ' effect(s) not applied' END,
                      CASE WHEN f.unapproved > 0 THEN f.unapproved || ' proposed write(s) refused, rejected or lapsed and never applied' END,
                      CASE WHEN f.unasserted > 0 THEN f.unasserted || ' effect assertion check(s) not passed' END,
                      CASE WHEN f.open_gates > 0 THEN f.open_gates || ' gate(s) open' END,
                      CASE WHEN f.held > 0 THEN f.held || ' approved effect(s) not settled' END,
                      CASE WHEN f.open_steps > 0 THEN f.open_steps || ' plan step(s) not verified' END], NULL) AS why, f.*
               FROM f
           ),
           d AS MATERIALIZED (
             SELECT CASE
                      WHEN c.closed_at IS NOT NULL THEN 'closed'
                      WHEN c.stop_mode = 'hard' OR w.root_state = 'cancelled' THEN 'cancelled'
                      WHEN w.root_state IS NULL OR NOT w.ever_ran THEN 'opened'
                      WHEN w.root_state IN ('done', 'failed') AND cardinality(w.why) = 0 AND w.told THEN 'resolved'
                      WHEN w.root_state IN ('done', 'failed') THEN 'parked'
                      WHEN w.open_gates > 0 THEN 'at_gate'
                      WHEN w.held > 0 THEN 'held'
                      WHEN w.active OR w.root_state = 'open' THEN 'running'
                      WHEN w.park_reason IS NOT NULL THEN 'parked'
                      ELSE 'opened'
                    END AS state,
                    w.why, w.root_state, w.park_reason, w.active, w.open_gates, w.told
               FROM c, w
           ),
           r AS (
             SELECT d.state, d.why,
                    CASE WHEN d.state <> 'parked' THEN NULL
                         WHEN d.root_state IN ('done', 'failed') AND cardinality(d.why) = 0 THEN 'telling_customer'
                         WHEN d.root_state IN ('done', 'failed') THEN 'unreconciled'
                         ELSE d.park_reason END AS reason
               FROM d
           )`;
}

/** The refresh of one case: its row says what it was, what it is now and whether it changed. */
export function refreshCaseState(caseId: string): Sql {
  return { name: 'ev_refresh_case_state', text: REFRESH_ONE, values: [caseId] };
}

/** What a refresh of a case answers, without the case: what an expecting refresh is told to expect. */
export type CaseStateOutcome = Omit<CaseStateChange, 'case_id'>;

/**
 * refreshCaseState that also checks what it derives against `expected`, and the case's ledger
 * head against `head` (the record the unit of work wrote before it: a part that was not written
 * leaves the head elsewhere). Either not holding fails the statement with SQLSTATE EV001
 * (ev_expect_case_state, migration 0028), which rolls its unit of work back — so a record
 * chained on the expectation, sent after this statement in the same unit of work, commits only
 * when the derivation gave exactly what the record says.
 */
export function refreshCaseStateExpecting(caseId: string, expected: CaseStateOutcome, head: { seq: number; hash: string }): Sql {
  return {
    name: 'ev_refresh_case_state_expecting',
    text: REFRESH_ONE_EXPECTING,
    values: [caseId, expected.from_state, expected.to_state, expected.from_reason, expected.to_reason, [...expected.why], expected.changed, head.seq, head.hash],
  };
}

/** The one-case refresh statement, with `extra` appended to what it returns. */
function refreshOneText(extra: string): string {
  return `WITH ${derivation('$1::uuid')},
           u AS (
             UPDATE cases SET state = r.state, state_reason = r.reason,
                              state_since = CASE WHEN cases.state = r.state THEN cases.state_since ELSE now() END,
                              row_version = cases.row_version + 1, updated_at = now()
               FROM r
              WHERE cases.id = $1::uuid AND (cases.state, cases.state_reason) IS DISTINCT FROM (r.state, r.reason)
          RETURNING cases.id
           )
           SELECT c.id AS case_id, c.state AS from_state, r.state AS to_state, c.state_reason AS from_reason, r.reason AS to_reason, r.why,
                  EXISTS (SELECT 1 FROM u) AS changed${extra}
             FROM c, r`;
}

// Statement texts are built once: node-postgres recognises a statement parsed on the connection by
// comparing its text, and a text assembled per call is a new string, flattened for every compare.
const REFRESH_ONE = refreshOneText('');
const REFRESH_ONE_EXPECTING = refreshOneText(`, ev_expect_case_state(
                    (c.state, r.state, c.state_reason, r.reason, r.why, EXISTS (SELECT 1 FROM u))
                      IS NOT DISTINCT FROM ($2::text, $3::text, $4::text, $5::text, $6::text[], $7::boolean)
                    AND EXISTS (SELECT 1 FROM ledger_heads h WHERE h.case_id = $1::uuid AND h.seq = $8::bigint AND h.hash = $9::text),
                    $1::uuid) AS expected`);

/**
 * The refresh of several DISTINCT cases in ONE statement: the derivation runs for each case on
 * its own (LATERAL; it reads only that case's records), then one UPDATE writes every state that
 * changed. Postgres plans it anew for every execution while it holds fewer than about ten ids
 * (its generic plan assumes ten), which costs more than that many refreshCaseState statements:
 * callers use it for REFRESH_SET_MIN cases or more.
 */
export function refreshCaseStates(caseIds: readonly string[]): Sql {
  return {
    name: 'ev_refresh_case_states',
    text: REFRESH_SET,
    values: [[...caseIds]],
  };
}

const REFRESH_SET = `WITH k AS (SELECT DISTINCT unnest($1::uuid[]) AS case_id),
           x AS MATERIALIZED (
             SELECT k.case_id, y.* FROM k, LATERAL (
               WITH ${derivation('k.case_id')}
               SELECT c.state AS from_state, r.state AS to_state, c.state_reason AS from_reason, r.reason AS to_reason, r.why
                 FROM c, r
             ) y
           ),
           u AS (
             UPDATE cases SET state = x.to_state, state_reason = x.to_reason,
                              state_since = CASE WHEN cases.state = x.to_state THEN cases.state_since ELSE now() END,
                              row_version = cases.row_version + 1, updated_at = now()
               FROM x
              -- The ANY lets the planner probe cases by primary key rather than join x to the whole table.
              WHERE cases.id = ANY($1::uuid[]) AND cases.id = x.case_id AND (cases.state, cases.state_reason) IS DISTINCT FROM (x.to_state, x.to_reason)
          RETURNING cases.id
           )
           SELECT x.case_id, x.from_state, x.to_state, x.from_reason, x.to_reason, x.why,
                  EXISTS (SELECT 1 FROM u WHERE u.id = x.case_id) AS changed
             FROM x`;

/** The fewest cases refreshCaseStates is used for (below, one refreshCaseState each; measured on this schema). */
export const REFRESH_SET_MIN = 10;
