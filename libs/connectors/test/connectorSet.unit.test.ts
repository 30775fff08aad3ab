/**
 * The connector set is built from the fleet config's `connectors` section, the one declaration
 * of every connector: what each declaration becomes, and that credentials and endpoints are taken
 * from the variables it names — never written in the config, never echoed in a problem.
 */
import { describe, expect, it } from 'vitest';
import { isEverdictError } from '@everdict/contracts';
import type { FleetHttpConnector, FleetPostgresConnector } from '@everdict/contracts';
import { ConnectorSet, buildableConnectors, connectorEnvProblems, openConnectors, sameConnectors } from '@everdict/connectors';

const notes: FleetHttpConnector = {
  kind: 'http',
  target: { system: 'notes', environment: 'test' },
  baseUrlEnv: 'NOTES_URL',
  headersFromEnv: { Authorization: 'NOTES_TOKEN' },
  receipts: { path: '/receipts/{idempotencyKey}', conclusive: true },
  operations: {
    'notes.append': { access: 'write', effectClass: 'note', method: 'POST', path: '/notes', body: { text: '{{text}}' }, params: { text: { type: 'string', minLength: 1, maxLength: 100 } }, impactKeys: ['notes:test'] },
    'notes.list': { access: 'read', method: 'GET', path: '/notes' },
  },
};

const estate: FleetPostgresConnector = {
  kind: 'postgres',
  target: { system: 'db', environment: 'test' },
  urlEnv: 'ESTATE_URL',
  readRole: 'reader',
  statementTimeoutMs: 2000,
  operations: {
    'entries.add': { access: 'write', effectClass: 'ddl', sql: 'INSERT INTO entries (id) VALUES (:id)', params: { id: { type: 'integer', minimum: 1 } }, expectedRows: 1 },
    'entries.count': { access: 'read', sql: 'SELECT count(*)::int AS n FROM entries', maxRows: 1 },
    'sql.select': { access: 'read', select: { relations: ['entries'], maxRows: 10 } },
  },
};

const env = { NOTES_URL: 'http://127.0.0.1:9/notes', NOTES_TOKEN: 'Bearer secret-token-1', ESTATE_URL: 'postgres://nobody@127.0.0.1:9/none' };
const detailsPath = (err: unknown): unknown => (isEverdictError(err) ? err.details['path'] : err);

describe('the connector set, from the fleet config declaration', () => {
  it('turns each declaration into its connector configuration: writes are mutations, reads are reads, values come from the named variables', () => {
    const { connectors, problems } = buildableConnectors({ notes, estate }, env);
    expect(problems).toEqual([]);
    expect(connectors[0]).toEqual({
      kind: 'http',
      config: {
        name: 'notes',
        target: notes.target,
        baseUrl: env.NOTES_URL,
        headers: { Authorization: env.NOTES_TOKEN },
        receipts: notes.receipts,
        operations: [
          { name: 'notes.append', kind: 'mutate', method: 'POST', path: '/notes', body: { text: '{{text}}' }, params: { text: { type: 'string', minLength: 1, maxLength: 100 } }, effectClass: 'note' },
          { name: 'notes.list', kind: 'read', method: 'GET', path: '/notes', params: {} },
        ],
      },
    });
    expect(connectors[1]).toEqual({
      kind: 'postgres',
      connectionString: env.ESTATE_URL,
      installReceipts: false,
      config: {
        name: 'estate',
        target: estate.target,
        readRole: 'reader',
        statementTimeoutMs: 2000,
        templates: [
          { name: 'entries.add', kind: 'mutate', sql: 'INSERT INTO entries (id) VALUES (:id)', params: { id: { type: 'integer', minimum: 1 } }, expectedRows: 1, effectClass: 'ddl' },
          { name: 'entries.count', kind: 'read', sql: 'SELECT count(*)::int AS n FROM entries', params: {}, maxRows: 1 },
        ],
        select: { relations: ['entries'], maxRows: 10 },
      },
    });
  });

  it('opens the declared connectors by name, with the capability the declaration states', async () => {
    const set = await openConnectors({ notes, estate }, env);
    expect(set.names()).toEqual(['estate', 'notes']);
    const cap = set.get('notes')!.describe();
    expect(cap.operations.map((o) => [o.name, o.effectClass])).toEqual([['notes.append', 'note']]);
    expect(cap.readOperations.map((o) => o.name)).toEqual(['notes.list']);
    expect(set.get('estate')!.describe().readOperations.map((o) => o.name).sort()).toEqual(['entries.count', 'sql.select']);
    expect(set.get('billing')).toBeUndefined();
    await set.close();
    expect(new ConnectorSet([]).names()).toEqual([]);
  });

  it('names every unset variable by its JSON path and name, never a value', async () => {
    expect(connectorEnvProblems({ notes, estate }, { NOTES_TOKEN: 'x' })).toEqual([
      { path: '/connectors/notes/baseUrlEnv', variable: 'NOTES_URL' },
      { path: '/connectors/estate/urlEnv', variable: 'ESTATE_URL' },
    ]);
    const err = await openConnectors({ notes }, { NOTES_URL: env.NOTES_URL, NOTES_TOKEN: ' ' }).catch((e: unknown) => e);
    expect(detailsPath(err)).toBe('/connectors/notes/headersFromEnv/Authorization');
    expect((err as Error).message).toMatch(/NOTES_TOKEN, which is not set/);
  });

  it('refuses a Postgres read template that is not a verified read when opened, before any contact, naming the connector path', async () => {
    // Nothing listens on port 9: contact would fail as a connection error, not as a review problem.
    const bad: FleetPostgresConnector = { ...estate, installReceipts: true, operations: { 'ids.next': { access: 'read', sql: "SELECT nextval('ids')" } } };
    const err = await openConnectors({ notes, estate: bad }, env).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'invalid_connector_config', details: { path: '/connectors/estate', problems: ['template "ids.next": not a verified read: calls function nextval, which is not in the allowed functions'] } });
  });

  it('compares two sections by content, not by key order', () => {
    const reordered = { estate, notes: { ...notes, operations: { 'notes.list': notes.operations['notes.list']!, 'notes.append': notes.operations['notes.append']! } } };
    expect(sameConnectors({ notes, estate }, reordered)).toBe(true);
    expect(sameConnectors({ notes }, { notes: { ...notes, timeoutMs: 100 } })).toBe(false);
    expect(sameConnectors(undefined, {})).toBe(true);
  });
});
