/**
 * The connectors a process may use (the execution coordinator executes through them, the
 * reconciler asks them WhatLanded), built from a connectors file (EVERDICT_CONNECTORS): the
 * reviewed operation definitions the fleet config's `connectors` section only names. Nothing else can reach an estate: an operation absent here is refused
 * before contact by the connector's own admission.
 *
 * File format (JSON):
 *   { "connectors": [
 *       { "kind": "http", ...HttpServiceConfig },
 *       { "kind": "postgres", "url" | "urlEnv", "installReceipts"?: boolean, ...PostgresEstateConfig } ] }
 *
 * The fleet config stays authoritative over WHAT may be gated: every connector and write
 * operation it declares must exist here, as a mutation with the same effect class; a
 * mismatch is a start-up error naming the JSON path, never a silent difference.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { EverdictError } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import type { Connector } from './connector.js';
import type { HttpServiceConfig } from './http/config.js';
import { HttpServiceConnector } from './http/connector.js';
import type { PostgresEstateConfig } from './postgres/config.js';
import { PostgresEstateConnector, estatePool } from './postgres/connector.js';

export type ConnectorEntry =
  | ({ readonly kind: 'http' } & HttpServiceConfig)
  | ({ readonly kind: 'postgres'; readonly url?: string; readonly urlEnv?: string; readonly installReceipts?: boolean } & PostgresEstateConfig);

export interface ConnectorsFile {
  readonly connectors: readonly ConnectorEntry[];
}

/** Connectors by name, opened once per process and closed at shutdown. */
export class ConnectorSet {
  private readonly byName: ReadonlyMap<string, Connector>;

  constructor(connectors: readonly Connector[]) {
    const map = new Map<string, Connector>();
    for (const c of connectors) {
      if (map.has(c.name)) throw new EverdictError('config_invalid', `two connectors are named ${c.name}`, { details: { path: `/connectors/${c.name}` } });
      map.set(c.name, c);
    }
    this.byName = map;
  }

  get(name: string): Connector | undefined {
    return this.byName.get(name);
  }

  names(): string[] {
    return [...this.byName.keys()].sort();
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.byName.values()].map((c) => c.close()));
  }
}

function problem(path: string, message: string): EverdictError {
  return new EverdictError('config_invalid', `connectors file: ${path} ${message}`, { details: { path } });
}

/**
 * Builds the connectors a file declares. Postgres estates get their own small pool; with
 * `installReceipts` the receipts table is created in the target when missing.
 *
 * @throws EverdictError `config_invalid` naming the JSON path, or the connector's own
 *   `invalid_connector_config` for a template that does not pass review.
 */
export async function openConnectors(file: ConnectorsFile, env: Readonly<Record<string, string | undefined>> = process.env): Promise<ConnectorSet> {
  if (!Array.isArray(file?.connectors)) throw problem('/connectors', 'must be an array');
  const built: Connector[] = [];
  try {
    for (const [i, entry] of file.connectors.entries()) {
      if (entry.kind === 'http') {
        const { kind: _kind, ...config } = entry;
        built.push(new HttpServiceConnector(config));
      } else if (entry.kind === 'postgres') {
        const { kind: _kind, url, urlEnv, installReceipts, ...config } = entry;
        const connectionString = url ?? (urlEnv ? env[urlEnv] : undefined);
        if (!connectionString) throw problem(`/connectors/${i}`, 'needs url or urlEnv naming a set variable');
        const connector = new PostgresEstateConnector(config, estatePool(connectionString, { applicationName: `everdict-${config.name}` }));
        built.push(connector);
        if (installReceipts) await connector.installReceipts();
      } else {
        throw problem(`/connectors/${i}/kind`, 'must be "http" or "postgres"');
      }
    }
    return new ConnectorSet(built);
  } catch (err) {
    await Promise.allSettled(built.map((c) => c.close()));
    throw err;
  }
}

/** Reads and opens the connectors file at `path`. */
export async function loadConnectors(path: string, env: Readonly<Record<string, string | undefined>> = process.env): Promise<ConnectorSet> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(resolve(path), 'utf8'));
  } catch (err) {
    throw new EverdictError('config_invalid', `connectors file ${resolve(path)} cannot be read as JSON (${(err as NodeJS.ErrnoException).code ?? 'parse error'})`, { cause: err, details: { path: '' } });
  }
  return openConnectors(parsed as ConnectorsFile, env);
}

/**
 * Problems between the fleet config's declared connectors/operations and the connectors built:
 * each names the fleet config JSON path. Empty when they agree.
 */
export function fleetConnectorProblems(fleet: Pick<FleetConfig, 'connectors'>, set: ConnectorSet): { path: string; message: string }[] {
  const problems: { path: string; message: string }[] = [];
  for (const [name, declared] of Object.entries(fleet.connectors ?? {})) {
    if (!declared) continue;
    const connector = set.get(name);
    if (!connector) {
      problems.push({ path: `/connectors/${name}`, message: 'is declared but the connectors file does not define it' });
      continue;
    }
    const capability = connector.describe();
    for (const [op, spec] of Object.entries(declared.operations)) {
      if (!spec) continue;
      const path = `/connectors/${name}/operations/${op}`;
      if (spec.access === 'write') {
        const mutation = capability.operations.find((o) => o.name === op);
        if (!mutation) problems.push({ path, message: 'is a write the connector does not register as a mutation' });
        else if (spec.effectClass !== undefined && spec.effectClass !== mutation.effectClass) problems.push({ path: `${path}/effectClass`, message: `differs from the connector's ${mutation.effectClass}` });
      } else if (!capability.readOperations.some((r) => r.name === op)) {
        problems.push({ path, message: 'is a read the connector does not register' });
      }
    }
  }
  return problems;
}
