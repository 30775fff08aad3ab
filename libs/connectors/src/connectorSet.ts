/**
 * The connectors a process may use (the execution coordinator executes through them, the
 * reconciler asks them WhatLanded, a turn-worker reads through them), built from the fleet
 * config's `connectors` section — the one declaration of every connector (declaration.ts).
 * Nothing else can reach an estate: an operation absent there is refused before contact by the
 * connector's own admission.
 */
import { EverdictError, canonicalJson } from '@everdict/contracts';
import type { Connector } from './connector.js';
import type { FleetConnectors } from './declaration.js';
import { buildableConnectors } from './declaration.js';
import { HttpServiceConnector } from './http/connector.js';
import { PostgresEstateConnector, estatePool } from './postgres/connector.js';

type Env = Readonly<Record<string, string | undefined>>;

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

/**
 * Builds the connectors the fleet config declares. Postgres estates get their own small pool;
 * with `installReceipts` the receipts table is created in the target when missing.
 *
 * @throws EverdictError `config_invalid` naming the JSON path (and any unset variable by name),
 *   or `invalid_connector_config` (a template or path that does not pass the connector's
 *   review) with `details.path` the connector's JSON path.
 */
export async function openConnectors(connectors: FleetConnectors | undefined, env: Env = process.env): Promise<ConnectorSet> {
  const { connectors: buildable, problems } = buildableConnectors(connectors, env);
  if (problems.length > 0) {
    throw new EverdictError('config_invalid', problems.map((p) => `${p.path} ${p.message}`).join('; '), { details: { path: problems[0]!.path, problems } });
  }
  const built: Connector[] = [];
  try {
    for (const b of buildable) {
      const path = `/connectors/${b.config.name}`;
      try {
        if (b.kind === 'http') {
          built.push(new HttpServiceConnector(b.config));
        } else {
          const connector = new PostgresEstateConnector(b.config, estatePool(b.connectionString, { applicationName: `everdict-${b.config.name}` }));
          built.push(connector);
          if (b.installReceipts) await connector.installReceipts();
        }
      } catch (err) {
        if (err instanceof EverdictError && err.details['path'] === undefined) throw new EverdictError(err.code, err.message, { cause: err, details: { ...err.details, path } });
        throw err;
      }
    }
    return new ConnectorSet(built);
  } catch (err) {
    await Promise.allSettled(built.map((c) => c.close()));
    throw err;
  }
}

/**
 * Whether two `connectors` sections declare the same connectors. Connectors are opened once
 * per process (pools, reviewed templates), so a reload that changes this section is refused.
 */
export function sameConnectors(a: FleetConnectors | undefined, b: FleetConnectors | undefined): boolean {
  return canonicalJson(a ?? {}) === canonicalJson(b ?? {});
}
