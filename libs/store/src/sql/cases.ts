/** Case statements. */
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
