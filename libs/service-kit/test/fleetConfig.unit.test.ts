/**
 * The fleet config's `connectors` section is the one declaration of every connector, checked by
 * the schema per kind (additional properties refused at every level) and by the reference checks
 * for what a schema cannot say. Every problem names its JSON path; only the selected kind's
 * problems are reported.
 */
import { describe, expect, it } from 'vitest';
import { FleetConfigError, validateFleetConfig } from '@everdict/service-kit';

const base = {
  version: 1,
  routes: { r: { adapter: 'scripted', model: 'm', scriptPath: 's.json' } },
  profiles: { p: { version: '1', route: 'r', prompt: 'x' } },
  caseTypes: { t: { rootProfile: 'p', scope: { reads: 'all', writes: [], forbidden: [] } } },
};
const notes = {
  kind: 'http',
  target: { system: 'notes', environment: 'test' },
  baseUrlEnv: 'NOTES_URL',
  headersFromEnv: { Authorization: 'NOTES_TOKEN' },
  receipts: { path: '/receipts/{idempotencyKey}', conclusive: true },
  operations: {
    'notes.append': { access: 'write', effectClass: 'note', method: 'POST', path: '/notes', body: { text: '{{text}}' }, params: { text: { type: 'string', minLength: 1, maxLength: 500 } } },
    'notes.list': { access: 'read', method: 'GET', path: '/notes' },
  },
};
const estate = {
  kind: 'postgres',
  target: { system: 'db', environment: 'test' },
  urlEnv: 'ESTATE_URL',
  readRole: 'reader',
  operations: {
    'entries.add': { access: 'write', effectClass: 'ddl', sql: 'INSERT INTO entries (id) VALUES (:id)', params: { id: { type: 'uuid' } }, expectedRows: 1 },
    'sql.select': { access: 'read', select: { relations: ['entries'] } },
  },
};

const problems = (connectors: unknown): string[] => {
  try {
    validateFleetConfig({ ...base, connectors });
    return [];
  } catch (err) {
    if (err instanceof FleetConfigError) return err.problems.map((p) => `${p.path} ${p.message}`);
    throw err;
  }
};
const withOp = (c: typeof notes | typeof estate, name: string, op: unknown) => ({ ...c, operations: { ...c.operations, [name]: op } });

describe('connector declarations in the fleet config', () => {
  it('accepts a complete http and postgres declaration', () => {
    expect(problems({ notes, estate })).toEqual([]);
  });

  it('reports a typo in an operation at its JSON path, once, and nothing from the other kind', () => {
    const typo = withOp(notes, 'notes.append', { access: 'write', effectClass: 'note', methd: 'POST', path: '/notes' });
    expect(problems({ notes: typo })).toEqual(['/connectors/notes/operations/notes.append/method is required', '/connectors/notes/operations/notes.append/methd is not allowed']);
  });

  it('refuses fields of another kind and unknown fields at every level', () => {
    expect(problems({ estate: { ...estate, baseUrl: 'http://x' } })).toEqual(['/connectors/estate/baseUrl is not allowed']);
    expect(problems({ estate: withOp(estate, 'rows.get', { access: 'read', sql: 'SELECT 1', method: 'GET' }) })).toEqual(['/connectors/estate/operations/rows.get/method is not allowed']);
    expect(problems({ notes: { ...notes, receipts: { path: '/r/{idempotencyKey}', conclusive: true, ttl: 1 } } })).toEqual(['/connectors/notes/receipts/ttl is not allowed']);
    expect(problems({ notes: withOp(notes, 'x', { access: 'read', method: 'GET', path: '/x', params: { a: { type: 'string', maxLen: 3 } } }) })).toEqual(['/connectors/notes/operations/x/params/a/maxLen is not allowed']);
    expect(problems({ notes: { ...notes, target: { system: 'notes' } } })).toEqual(['/connectors/notes/target/environment is required']);
    expect(problems({ x: { kind: 'ftp', operations: {} } })).toEqual(['/connectors/x/kind must be one of ["http","postgres"]']);
  });

  it('takes credentials only by variable name: an inline connection string or header is refused', () => {
    expect(problems({ estate: { ...estate, url: 'postgres://u:p@h/db' } })).toEqual(['/connectors/estate/url is not allowed']);
    expect(problems({ notes: { ...notes, headers: { Authorization: 'Bearer x' } } })).toEqual(['/connectors/notes/headers is not allowed']);
    expect(problems({ notes: { ...notes, headersFromEnv: { Authorization: 'Bearer x' } } })).toEqual([expect.stringMatching(/^\/connectors\/notes\/headersFromEnv\/Authorization must match pattern/)]);
  });

  it('checks what the schema cannot: one of baseUrl or baseUrlEnv, an effect class on every write, one of sql or select', () => {
    const { baseUrlEnv: _e, ...noUrl } = notes;
    expect(problems({ notes: noUrl })).toEqual(['/connectors/notes needs exactly one of baseUrl or baseUrlEnv']);
    expect(problems({ notes: { ...notes, baseUrl: 'http://127.0.0.1/n' } })).toEqual(['/connectors/notes needs exactly one of baseUrl or baseUrlEnv']);
    expect(problems({ notes: withOp(notes, 'notes.drop', { access: 'write', method: 'DELETE', path: '/notes' }) })).toEqual(['/connectors/notes/operations/notes.drop/effectClass is required for a write']);
    expect(problems({ estate: withOp(estate, 'rows.get', { access: 'read' }) })).toEqual(['/connectors/estate/operations/rows.get needs exactly one of sql or select']);
    expect(problems({ estate: withOp(estate, 'rows.any', { access: 'read', select: { relations: ['t'] } }) })).toEqual(['/connectors/estate/operations/rows.any/select is only allowed on the operation sql.select']);
    expect(problems({ notes: withOp(notes, 'x', { access: 'read', method: 'GET', path: '/x/{a}', params: { a: { type: 'string', required: false } } }) })).toEqual([
      '/connectors/notes/operations/x/params/a/required must not be false: a connector binds every declared parameter',
    ]);
  });
});
