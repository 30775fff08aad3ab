/**
 * What `writes.propose` reads before it builds a gate request (DESIGN §6, seed 004 §2.2):
 * - earlier gates of the same mutation (case + plan step + semantic hash) — a re-proposal under
 *   a new tool-call id must find the gate already asked for, not open a second one;
 * - the landed receipt of an earlier plan step's effect — the ids a step returned, which a later
 *   packet binds before audit.
 * Reads only; the proposal itself is written by the turn's unit of work.
 */
import type { Queryable, Sql } from './db.js';
import { loadLandedRecord } from './effects.js';
import type { LandedRecord } from './effects.js';

interface MutationGateRow {
  id: string;
  task_id: string;
  state: string;
  packet_digest: string;
  created_at: Date;
}

/** Gates opened for one mutation key in a case, newest first. */
function selectGatesOfMutation(caseId: string, mutationKey: string): Sql {
  return {
    name: 'proposals_gates_of_mutation',
    text: `SELECT id, task_id, state, packet_digest, created_at FROM gates
            WHERE case_id = $1::uuid AND mutation_key = $2::text
            ORDER BY created_at DESC, id DESC`,
    values: [caseId, mutationKey],
  };
}

export async function gatesOfMutation(q: Queryable, caseId: string, mutationKey: string): Promise<MutationGateRow[]> {
  return (await q.query<MutationGateRow>(selectGatesOfMutation(caseId, mutationKey))).rows;
}

/**
 * The completed effect call of a plan step in a case: the dispatch of a gate whose mutation key
 * starts with `case/step/`, whose journal call completed (applied). Newest first.
 */
function selectCompletedEffectOfStep(caseId: string, planStepId: string): Sql {
  return {
    name: 'proposals_completed_effect_of_step',
    text: `SELECT c.id, c.response_paper_id FROM gates g
             JOIN effect_dispatches d ON d.gate_id = g.id
             JOIN runtime_calls c ON c.id = d.call_id
            WHERE g.case_id = $1::uuid AND left(g.mutation_key, length($2::text)) = $2::text
              AND c.kind = 'effect' AND c.status = 'completed'
            ORDER BY c.completed_at DESC NULLS LAST, c.id DESC
            LIMIT 1`,
    values: [caseId, `${caseId}/${planStepId}/`],
  };
}

/** The landed record (receipt) of a plan step's applied effect, if the step has one. */
export async function landedOfStep(q: Queryable, caseId: string, planStepId: string): Promise<LandedRecord | undefined> {
  const row = (await q.query<{ id: string; response_paper_id: string | null }>(selectCompletedEffectOfStep(caseId, planStepId))).rows[0];
  return row ? loadLandedRecord(q, row) : undefined;
}
