/** Case statements: opening a case, and its stop (§7). */
import type { Sql } from '../db.js';

export function insertCase(c: { id: string; caseType: string; originKey: string; customer: string; title?: string; objective?: unknown; scope?: unknown }): Sql {
  return {
    text: `INSERT INTO cases (id, case_type, origin_key, customer, title, objective, scope)
           VALUES ($1::uuid, $2::text, $3::text, $4::text, $5::text, $6::jsonb, $7::jsonb)
           ON CONFLICT (origin_key) DO NOTHING
           RETURNING id`,
    values: [c.id, c.caseType, c.originKey, c.customer, c.title ?? '', JSON.stringify(c.objective ?? {}), JSON.stringify(c.scope ?? {})],
  };
}

export function selectCaseByOrigin(originKey: string): Sql {
  return { text: 'SELECT id FROM cases WHERE origin_key = $1::text', values: [originKey] };
}

// ------------------------------------------------------------------------------- the case stop

/** The case's stop mode, locking the row: stops and resumes of one case serialise here. */
export function lockCaseStop(caseId: string): Sql {
  return { text: 'SELECT stop_mode FROM cases WHERE id = $1::uuid FOR UPDATE', values: [caseId] };
}

export function setCaseStop(caseId: string, stopMode: 'hard' | 'soft'): Sql {
  return {
    text: 'UPDATE cases SET stop_mode = $2::text, row_version = row_version + 1, updated_at = now() WHERE id = $1::uuid',
    values: [caseId, stopMode],
  };
}

/** Lifts a soft stop; a hard stop is final and is never lifted. */
export function liftSoftCaseStop(caseId: string): Sql {
  return {
    text: "UPDATE cases SET stop_mode = NULL, row_version = row_version + 1, updated_at = now() WHERE id = $1::uuid AND stop_mode = 'soft'",
    values: [caseId],
  };
}

/** The case's current root task: the newest task without a parent (a reopened case has a new one). */
export function selectRootTask(caseId: string): Sql {
  return { text: 'SELECT id FROM tasks WHERE case_id = $1::uuid AND parent_id IS NULL ORDER BY created_at DESC, id DESC LIMIT 1', values: [caseId] };
}

/** The task, if it belongs to the case. */
export function selectCaseTask(caseId: string, taskId: string): Sql {
  return { text: 'SELECT id FROM tasks WHERE id = $1::uuid AND case_id = $2::uuid', values: [taskId, caseId] };
}
