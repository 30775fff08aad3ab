/**
 * Every plan revision of a case's tasks with its confirmation (issue 13 item 9): revisions are
 * immutable records; a confirmation is its own record (a child's, by its parent, §11.3). The
 * current projection is PLAN_STEPS (selectCasePlanSteps), whose `done` is never the model's claim.
 */
import type { Queryable } from './db.js';

export interface CasePlanRevisionRow {
  task_id: string;
  parent_id: string | null;
  revision: number;
  plan_hash: string;
  steps: unknown;
  created_at: Date;
  confirmed_by: string | null;
  confirmed_at: Date | null;
}

export async function loadCasePlanRevisions(q: Queryable, caseId: string): Promise<CasePlanRevisionRow[]> {
  const res = await q.query<CasePlanRevisionRow>({
    text: `SELECT r.task_id, t.parent_id, r.revision, r.plan_hash, r.steps, r.created_at, c.confirmed_by, c.confirmed_at
             FROM plan_revisions r
             JOIN tasks t ON t.id = r.task_id
             LEFT JOIN plan_confirmations c ON c.task_id = r.task_id AND c.revision = r.revision
            WHERE t.case_id = $1::uuid
            ORDER BY t.created_at, t.id, r.revision`,
    values: [caseId],
  });
  return res.rows;
}
