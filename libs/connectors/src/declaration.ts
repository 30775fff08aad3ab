/**
 * The fleet config's `connectors` section is THE declaration of every connector: this module
 * turns one declaration into the configuration a connector is built from. Pure: the environment
 * is passed in, nothing is opened.
 *
 * Invariants:
 * - Credentials and endpoints that may carry them are named by environment variable only
 *   (`baseUrlEnv`, `headersFromEnv`, `urlEnv`); their values are read here and never appear in
 *   a problem message — only the JSON path and the variable's name do.
 * - A read operation is a connector `read`, a write is a `mutate`. The schema and the fleet
 *   config's reference checks have vouched for every declaration; the connectors' own reviews
 *   (templates, paths, placeholders) run when they are built.
 */
import type { FleetConfig, FleetHttpConnector, FleetParamBound, FleetPostgresConnector } from '@everdict/contracts';
import type { JsonValue } from './connector.js';
import type { HttpOperationConfig, HttpServiceConfig } from './http/config.js';
import type { ParamSpec } from './params.js';
import type { PgSelectConfig, PgTemplateConfig, PostgresEstateConfig } from './postgres/config.js';
import { httpOperationHash, pgTemplateHash } from './template-hash.js';

type Env = Readonly<Record<string, string | undefined>>;
export type FleetConnectors = NonNullable<FleetConfig['connectors']>;

/** A problem with a declaration, naming its JSON path in the fleet config. */
export interface DeclarationProblem {
  readonly path: string;
  readonly message: string;
}

export type BuildableConnector =
  | { readonly kind: 'http'; readonly config: HttpServiceConfig }
  | { readonly kind: 'postgres'; readonly config: PostgresEstateConfig; readonly connectionString: string; readonly installReceipts: boolean };

const pointer = (...parts: string[]) => `/${parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;

/** Every environment variable a declaration names, with the JSON path that names it. */
export function connectorEnvNames(connectors: FleetConnectors | undefined): { path: string; variable: string }[] {
  const out: { path: string; variable: string }[] = [];
  for (const [name, c] of Object.entries(connectors ?? {})) {
    if (!c) continue;
    if (c.kind === 'http') {
      if (c.baseUrlEnv !== undefined) out.push({ path: pointer('connectors', name, 'baseUrlEnv'), variable: c.baseUrlEnv });
      for (const [header, variable] of Object.entries(c.headersFromEnv ?? {})) if (variable !== undefined) out.push({ path: pointer('connectors', name, 'headersFromEnv', header), variable });
    } else {
      out.push({ path: pointer('connectors', name, 'urlEnv'), variable: c.urlEnv });
    }
  }
  return out;
}

/** The named variables that are unset or blank in `env`. */
export function connectorEnvProblems(connectors: FleetConnectors | undefined, env: Env): { path: string; variable: string }[] {
  return connectorEnvNames(connectors).filter((n) => (env[n.variable]?.trim() ?? '') === '');
}

function paramSpec(bound: FleetParamBound): ParamSpec {
  const { required: _required, ...spec } = bound;
  return spec;
}

const paramSpecs = (params: Readonly<Record<string, FleetParamBound | undefined>> | undefined): Record<string, ParamSpec> =>
  Object.fromEntries(Object.entries(params ?? {}).flatMap(([k, b]) => (b === undefined ? [] : [[k, paramSpec(b)]])));

function httpConfig(name: string, c: FleetHttpConnector, env: Env): HttpServiceConfig {
  const operations: HttpOperationConfig[] = Object.entries(c.operations).flatMap(([op, spec]) =>
    spec === undefined
      ? []
      : [
          {
            name: op,
            kind: spec.access === 'write' ? ('mutate' as const) : ('read' as const),
            method: spec.method,
            path: spec.path,
            ...(spec.body === undefined ? {} : { body: spec.body as JsonValue }),
            params: paramSpecs(spec.params),
            ...(spec.effectClass === undefined ? {} : { effectClass: spec.effectClass }),
            ...(spec.idempotent === undefined ? {} : { idempotent: spec.idempotent }),
            ...(spec.postState === undefined ? {} : { postState: { ...spec.postState, equals: spec.postState.equals as JsonValue } }),
          },
        ],
  );
  const headers = Object.fromEntries(Object.entries(c.headersFromEnv ?? {}).flatMap(([h, v]) => (v === undefined ? [] : [[h, env[v] ?? '']])));
  return {
    name,
    target: c.target,
    baseUrl: c.baseUrl ?? env[c.baseUrlEnv ?? ''] ?? '',
    ...(Object.keys(headers).length > 0 ? { headers } : {}),
    ...(c.timeoutMs === undefined ? {} : { timeoutMs: c.timeoutMs }),
    ...(c.maxResponseBytes === undefined ? {} : { maxResponseBytes: c.maxResponseBytes }),
    ...(c.receipts === undefined ? {} : { receipts: c.receipts }),
    operations,
  };
}

function postgresConfig(name: string, c: FleetPostgresConnector): PostgresEstateConfig {
  const templates: PgTemplateConfig[] = [];
  let select: PgSelectConfig | undefined;
  for (const [op, spec] of Object.entries(c.operations)) {
    if (spec === undefined) continue;
    if (spec.select !== undefined) {
      select = spec.select;
      continue;
    }
    templates.push({
      name: op,
      kind: spec.access === 'write' ? 'mutate' : 'read',
      sql: spec.sql ?? '',
      params: paramSpecs(spec.params),
      ...(spec.expectedRows === undefined ? {} : { expectedRows: spec.expectedRows }),
      ...(spec.effectClass === undefined ? {} : { effectClass: spec.effectClass }),
      ...(spec.idempotent === undefined ? {} : { idempotent: spec.idempotent }),
      ...(spec.maxRows === undefined ? {} : { maxRows: spec.maxRows }),
    });
  }
  return {
    name,
    target: c.target,
    templates,
    ...(c.receiptsTable === undefined ? {} : { receiptsTable: c.receiptsTable }),
    ...(c.statementTimeoutMs === undefined ? {} : { statementTimeoutMs: c.statementTimeoutMs }),
    ...(c.lockTimeoutMs === undefined ? {} : { lockTimeoutMs: c.lockTimeoutMs }),
    ...(c.relations === undefined ? {} : { relations: c.relations }),
    ...(c.allowedFunctions === undefined ? {} : { allowedFunctions: c.allowedFunctions }),
    ...(c.readRole === undefined ? {} : { readRole: c.readRole }),
    ...(select === undefined ? {} : { select }),
  };
}

/**
 * The template hash the connector built from `declaration` registers for its write `operation`
 * (undefined when the declaration has no such write). Pure: endpoints and credentials are not
 * part of a template, so no environment is needed.
 */
export function declaredTemplateHash(name: string, declaration: FleetHttpConnector | FleetPostgresConnector, operation: string): string | undefined {
  if (declaration.kind === 'http') {
    const op = httpConfig(name, declaration, {}).operations.find((o) => o.name === operation && o.kind === 'mutate');
    return op === undefined ? undefined : httpOperationHash(op);
  }
  const t = postgresConfig(name, declaration).templates.find((o) => o.name === operation && o.kind === 'mutate');
  return t === undefined ? undefined : pgTemplateHash(t);
}

/**
 * The connectors a declaration builds, or every problem: declaration rules and unset variables,
 * each naming its JSON path (and the variable, never its value).
 */
export function buildableConnectors(connectors: FleetConnectors | undefined, env: Env): { connectors: BuildableConnector[]; problems: DeclarationProblem[] } {
  // The fleet config loader has checked the declaration rules (service-kit fleetConfig.ts).
  const problems: DeclarationProblem[] = connectorEnvProblems(connectors, env).map((n) => ({ path: n.path, message: `names the environment variable ${n.variable}, which is not set` }));
  if (problems.length > 0) return { connectors: [], problems };
  const out: BuildableConnector[] = [];
  for (const [name, c] of Object.entries(connectors ?? {})) {
    if (!c) continue;
    if (c.kind === 'http') out.push({ kind: 'http', config: httpConfig(name, c, env) });
    else out.push({ kind: 'postgres', config: postgresConfig(name, c), connectionString: env[c.urlEnv] ?? '', installReceipts: c.installReceipts ?? false });
  }
  return { connectors: out, problems };
}
