import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isEverdictError } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import { ConnectorSet, fleetConnectorProblems, loadConnectors, openConnectors } from '@everdict/connectors';
import type { ConnectorEntry, ConnectorsFile } from '@everdict/connectors';

const notes: ConnectorEntry = {
  kind: 'http',
  name: 'notes',
  target: { system: 'notes', environment: 'test' },
  baseUrl: 'http://127.0.0.1:9/notes',
  receipts: { path: '/receipts/{idempotencyKey}', conclusive: true },
  operations: [
    { name: 'notes.append', kind: 'mutate', method: 'POST', path: '/notes', body: { text: '{{text}}' }, params: { text: { type: 'string', minLength: 1, maxLength: 100 } }, effectClass: 'note' },
    { name: 'notes.list', kind: 'read', method: 'GET', path: '/notes', params: {} },
  ],
};

const configPath = (err: unknown): unknown => (isEverdictError(err, 'config_invalid') ? (err.details as { path?: string } | undefined)?.path : err);

describe('the connector set', () => {
  const dir = mkdtempSync(join(tmpdir(), 'everdict-connectors-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('opens the connectors a file declares, by name', async () => {
    const path = join(dir, 'connectors.json');
    writeFileSync(path, JSON.stringify({ connectors: [notes] }));
    const set = await loadConnectors(path);
    expect(set.names()).toEqual(['notes']);
    expect(set.get('notes')?.name).toBe('notes');
    expect(set.get('billing')).toBeUndefined();
    await set.close();
  });

  it('refuses a file it cannot use, naming the JSON path', async () => {
    const unreadable = join(dir, 'broken.json');
    writeFileSync(unreadable, '{nope');
    await expect(loadConnectors(unreadable).catch(configPath)).resolves.toBe('');
    await expect(openConnectors({} as ConnectorsFile).catch(configPath)).resolves.toBe('/connectors');
    await expect(openConnectors({ connectors: [notes, { kind: 'ftp' }] } as unknown as ConnectorsFile).catch(configPath)).resolves.toBe('/connectors/1/kind');
    await expect(openConnectors({ connectors: [notes, { kind: 'postgres', urlEnv: 'EVERDICT_UNSET_URL' }] } as unknown as ConnectorsFile, {}).catch(configPath)).resolves.toBe('/connectors/1');
    await expect(openConnectors({ connectors: [notes, notes] }).catch(configPath)).resolves.toBe('/connectors/notes');
  });

  it('refuses a Postgres read template that is not a verified read when the file is opened, before any contact', async () => {
    // Nothing listens on port 9: contact would fail as a connection error, not as a review problem.
    const estate = {
      kind: 'postgres',
      url: 'postgres://nobody@127.0.0.1:9/none',
      installReceipts: true,
      name: 'estate',
      target: { system: 'db', environment: 'test' },
      templates: [{ name: 'ids.next', kind: 'read', sql: "SELECT nextval('ids')", params: {} }],
    } as const;
    await expect(openConnectors({ connectors: [notes, estate] })).rejects.toMatchObject({
      code: 'invalid_connector_config',
      details: { problems: ['template "ids.next": not a verified read: calls function nextval, which is not in the allowed functions'] },
    });
  });

  it('names every difference between the fleet config and the connectors built', async () => {
    const set = await openConnectors({ connectors: [notes] });
    const fleet = (operations: NonNullable<FleetConfig['connectors']>[string]): Pick<FleetConfig, 'connectors'> => ({ connectors: { notes: operations } });
    expect(fleetConnectorProblems(fleet({ kind: 'http', operations: { 'notes.append': { access: 'write', effectClass: 'note' }, 'notes.list': { access: 'read' } } }), set)).toEqual([]);
    expect(fleetConnectorProblems(fleet({ kind: 'http', operations: { 'notes.append': { access: 'write', effectClass: 'ledger' }, 'notes.list': { access: 'write' }, 'notes.drop': { access: 'read' } } }), set).map((p) => p.path)).toEqual([
      '/connectors/notes/operations/notes.append/effectClass',
      '/connectors/notes/operations/notes.list',
      '/connectors/notes/operations/notes.drop',
    ]);
    expect(fleetConnectorProblems({ connectors: { billing: { kind: 'http', operations: {} } } }, set)).toEqual([{ path: '/connectors/billing', message: 'is declared but the connectors file does not define it' }]);
    await set.close();
    expect(new ConnectorSet([]).names()).toEqual([]);
  });
});
