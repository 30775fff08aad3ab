/**
 * The fleet config file (DESIGN §7): EVERDICT_CONFIG names a JSON document validated by
 * schemas/fleet-config.schema.json, then checked for the references the schema cannot express
 * (a profile's route, a case type's root profile, a profile's tools, connector reads and child
 * profile).
 *
 * Invariants:
 * - Every problem is reported at once, each naming its JSON path (`/profiles/triage/route`), in
 *   one `FleetConfigError` (code `fleet_config_invalid`): an operator fixes the file in one go.
 * - Values are never echoed (a route may name an endpoint with credentials in it); paths and
 *   the rule that failed are.
 * - Relative script paths resolve against the config file's folder (`baseDir`), so a config
 *   means the same thing whatever the process's working directory.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { EverdictError, SCHEMAS_DIR, connectorReadToolName, isValidConnectorReadToolName, parseConnectorRead, schemaValidator, schemaViolations } from '@everdict/contracts';
import type { FleetConfig, FleetParamBound } from '@everdict/contracts';

interface FleetConfigProblem {
  /** JSON Pointer of the offending value ("" is the document). */
  readonly path: string;
  readonly message: string;
}

export class FleetConfigError extends EverdictError {
  readonly problems: readonly FleetConfigProblem[];

  constructor(source: string, problems: readonly FleetConfigProblem[]) {
    const list = problems
      .slice(0, 10)
      .map((p) => `${p.path || '/'} ${p.message}`)
      .join('; ');
    const more = problems.length > 10 ? `; and ${problems.length - 10} more` : '';
    super('fleet_config_invalid', `fleet config ${source} is invalid: ${list}${more}`, { details: { path: problems[0]?.path ?? '', problems: problems.map((p) => ({ ...p })) } });
    this.problems = Object.freeze([...problems]);
  }
}

export interface LoadedFleetConfig {
  readonly config: FleetConfig;
  /** Folder relative paths in the config resolve against. */
  readonly baseDir: string;
  /** Path the config was read from (absent when validated from a value). */
  readonly path?: string;
}

const pointer = (...parts: string[]) => `/${parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;

/** One Ajv error, as the compiled validators report them. */
type ErrorObject = NonNullable<ReturnType<typeof schemaValidator>['errors']>[number];

/** The ad-hoc read a postgres connector's `select` registers (libs/connectors SELECT_OPERATION). */
const SQL_SELECT = 'sql.select';

interface KindShape {
  readonly props: ReadonlySet<string>;
  readonly required: ReadonlySet<string>;
  readonly opProps: ReadonlySet<string>;
  readonly opRequired: ReadonlySet<string>;
}

/** Each connector kind's fields, read from the schema itself so the two never drift. */
const CONNECTOR_KINDS: ReadonlyMap<string, KindShape> = (() => {
  type Def = { properties: Record<string, unknown>; required?: string[] };
  const defs = (JSON.parse(readFileSync(join(SCHEMAS_DIR, 'fleet-config.schema.json'), 'utf8')) as { $defs: Record<string, Def> }).$defs;
  const shape = (c: Def, o: Def): KindShape => ({ props: new Set(Object.keys(c.properties)), required: new Set(c.required ?? []), opProps: new Set(Object.keys(o.properties)), opRequired: new Set(o.required ?? []) });
  return new Map([
    ['http', shape(defs['httpConnector']!, defs['httpOperation']!)],
    ['postgres', shape(defs['postgresConnector']!, defs['postgresOperation']!)],
  ]);
})();

/**
 * A connector is `oneOf` its kinds, and Ajv reports every branch's failures. Only the errors of
 * the branch the connector's `kind` selects are the operator's problems (a typo `methd` in an
 * http operation is reported once, at its path, not also as "sql is missing"): errors about
 * fields the selected kind does not have, or requirements it does not make, came from the other
 * branch and are dropped, as is the `oneOf` summary. An unknown kind is reported as such.
 */
function selectedKindErrors(errors: readonly ErrorObject[], value: unknown): ErrorObject[] {
  const connectors = (value as { connectors?: Record<string, { kind?: unknown } | undefined> } | null)?.connectors;
  const CONNECTOR = /^\/connectors\/([^/]+)(?:\/(.*))?$/;
  const out: ErrorObject[] = [];
  const badKinds = new Set<string>();
  for (const e of errors) {
    const m = CONNECTOR.exec(e.instancePath);
    const name = m?.[1]?.replace(/~1/g, '/').replace(/~0/g, '~');
    const declared = name === undefined || connectors === null || typeof connectors !== 'object' ? undefined : connectors[name];
    if (m === null || name === undefined || declared === undefined || typeof declared !== 'object' || declared === null) {
      out.push(e);
      continue;
    }
    const kind = CONNECTOR_KINDS.get(String(declared.kind));
    if (kind === undefined) {
      if (!badKinds.has(m[1]!)) out.push({ ...e, instancePath: `/connectors/${m[1]!}/kind`, keyword: 'enum', params: { allowedValues: [...CONNECTOR_KINDS.keys()] } });
      badKinds.add(m[1]!);
      continue;
    }
    const rel = m[2] === undefined ? [] : m[2].split('/');
    if (e.keyword === 'oneOf' && rel.length === 0) continue;
    if (rel.length === 0 && e.keyword === 'required' && !kind.required.has(String(e.params['missingProperty']))) continue;
    if (rel.length === 0 && e.keyword === 'additionalProperties' && kind.props.has(String(e.params['additionalProperty']))) continue;
    if (rel[0] === 'kind') continue;
    if (rel.length > 0 && !kind.props.has(rel[0]!)) continue;
    if (rel[0] === 'operations' && rel.length === 2 && e.keyword === 'required' && !kind.opRequired.has(String(e.params['missingProperty']))) continue;
    if (rel[0] === 'operations' && rel.length === 2 && e.keyword === 'additionalProperties' && kind.opProps.has(String(e.params['additionalProperty']))) continue;
    if (rel[0] === 'operations' && rel.length > 2 && !kind.opProps.has(rel[2]!)) continue;
    out.push(e);
  }
  return out;
}

/** Reference checks across sections; the schema has already vouched for every shape. */
function referenceProblems(c: FleetConfig): FleetConfigProblem[] {
  const problems: FleetConfigProblem[] = [];
  const routes = new Set(Object.keys(c.routes));
  const profiles = new Set(Object.keys(c.profiles));
  const tools = new Set(Object.keys(c.tools ?? {}));
  for (const [name, route] of Object.entries(c.routes)) {
    if (!route) continue;
    if (route.adapter === 'openai' && route.baseUrl === undefined) problems.push({ path: pointer('routes', name, 'baseUrl'), message: 'is required for adapter openai' });
    if (route.adapter === 'scripted' && route.scriptPath === undefined) problems.push({ path: pointer('routes', name, 'scriptPath'), message: 'is required for adapter scripted' });
  }
  for (const [name, p] of Object.entries(c.profiles)) {
    if (!p) continue;
    if (!routes.has(p.route)) problems.push({ path: pointer('profiles', name, 'route'), message: `names route ${JSON.stringify(p.route)}, which routes does not declare` });
    (p.tools ?? []).forEach((t, i) => {
      if (!tools.has(t)) problems.push({ path: pointer('profiles', name, 'tools', String(i)), message: `names tool ${JSON.stringify(t)}, which tools does not declare` });
    });
    if (p.childProfile !== undefined && !profiles.has(p.childProfile)) {
      problems.push({ path: pointer('profiles', name, 'childProfile'), message: `names profile ${JSON.stringify(p.childProfile)}, which profiles does not declare` });
    }
    if (p.auditor !== undefined && !profiles.has(p.auditor)) {
      problems.push({ path: pointer('profiles', name, 'auditor'), message: `names profile ${JSON.stringify(p.auditor)}, which profiles does not declare` });
    }
    // The auditor is not the writer (seed 004 §5).
    if (p.auditor === name) problems.push({ path: pointer('profiles', name, 'auditor'), message: 'must be a different profile than the one it audits' });
    if (p.compaction?.keepRecent !== undefined && p.compaction.maxMessages !== undefined && p.compaction.keepRecent >= p.compaction.maxMessages) {
      problems.push({ path: pointer('profiles', name, 'compaction', 'keepRecent'), message: 'must be smaller than maxMessages' });
    }
  }
  problems.push(...connectorDeclarationProblems(c));
  problems.push(...connectorReadProblems(c, tools));
  problems.push(...mcpProblems(c));
  problems.push(...consentProblems(c));
  for (const [name, ct] of Object.entries(c.caseTypes)) {
    if (!ct) continue;
    if (!profiles.has(ct.rootProfile)) problems.push({ path: pointer('caseTypes', name, 'rootProfile'), message: `names profile ${JSON.stringify(ct.rootProfile)}, which profiles does not declare` });
  }
  const b = c.runtime?.providerBackoffMs;
  if (b?.initial !== undefined && b.max !== undefined && b.max < b.initial) problems.push({ path: '/runtime/providerBackoffMs/max', message: 'must not be smaller than initial' });
  return problems;
}

/**
 * What the schema cannot say about a connector declaration: one of two fields, and the rules
 * binding operations to the connector's own parameter binding (every declared parameter is
 * required, so `required: false` cannot be honoured).
 */
function connectorDeclarationProblems(c: FleetConfig): FleetConfigProblem[] {
  const problems: FleetConfigProblem[] = [];
  for (const [name, conn] of Object.entries(c.connectors ?? {})) {
    if (!conn) continue;
    if (conn.kind === 'http' && (conn.baseUrl === undefined) === (conn.baseUrlEnv === undefined)) problems.push({ path: pointer('connectors', name), message: 'needs exactly one of baseUrl or baseUrlEnv' });
    for (const [op, spec] of Object.entries(conn.operations)) {
      if (!spec) continue;
      const at = (...rest: string[]) => pointer('connectors', name, 'operations', op, ...rest);
      if (spec.access === 'write' && spec.effectClass === undefined) problems.push({ path: at('effectClass'), message: 'is required for a write' });
      for (const [param, bound] of Object.entries<FleetParamBound | undefined>(spec.params ?? {})) {
        if (bound?.required === false) problems.push({ path: at('params', param, 'required'), message: 'must not be false: a connector binds every declared parameter' });
      }
      if (conn.kind !== 'postgres' || !('access' in spec)) continue;
      const pg = spec as { sql?: string; select?: unknown; params?: unknown; access: string };
      if ((pg.sql === undefined) === (pg.select === undefined)) problems.push({ path: at(), message: 'needs exactly one of sql or select' });
      if (pg.select !== undefined) {
        if (op !== SQL_SELECT) problems.push({ path: at('select'), message: `is only allowed on the operation ${SQL_SELECT}` });
        if (pg.access !== 'read') problems.push({ path: at('access'), message: 'must be read for select' });
        if (pg.params !== undefined) problems.push({ path: at('params'), message: 'must be omitted for select: its one parameter is the query' });
      }
    }
  }
  return problems;
}

/**
 * A profile's `reads` name declared read operations, and the tool names they derive are
 * unambiguous: no two entries and no built-in tool share one.
 */
function connectorReadProblems(c: FleetConfig, tools: ReadonlySet<string>): FleetConfigProblem[] {
  const problems: FleetConfigProblem[] = [];
  const derived = new Map<string, string>();
  for (const [name, p] of Object.entries(c.profiles)) {
    (p?.reads ?? []).forEach((entry, i) => {
      const path = pointer('profiles', name, 'reads', String(i));
      const ref = parseConnectorRead(entry);
      const op = ref === null ? undefined : c.connectors?.[ref.connector]?.operations[ref.operation];
      if (ref === null || !c.connectors?.[ref.connector]) return void problems.push({ path, message: 'names a connector that connectors does not declare' });
      if (!op) return void problems.push({ path, message: `names an operation connectors.${ref.connector}.operations does not declare` });
      if (op.access !== 'read') return void problems.push({ path, message: 'names a write; writes go through writes__propose' });
      if (!isValidConnectorReadToolName(ref)) return void problems.push({ path, message: 'derives a tool name longer than 64 characters' });
      const tool = connectorReadToolName(ref);
      const other = derived.get(tool);
      if (tools.has(tool)) problems.push({ path, message: `derives the tool name ${tool}, which tools already declares` });
      else if (other !== undefined && other !== entry) problems.push({ path, message: `derives the tool name ${tool}, as ${JSON.stringify(other)} does` });
      else derived.set(tool, entry);
    });
  }
  return problems;
}

/** A profile's `mcp` entries name servers `mcpServers` declares, each server once. */
/**
 * A case type's consent rules name what they decide: a tool (a built-in, a connector read's
 * derived name or `connector/operation`, an MCP tool as `server__tool`), a connector or an MCP
 * server. A rule naming nothing is a typo that would leave the read refused. With principals
 * configured, the role that decides an `ask` must be held by one of them.
 */
export function consentProblems(c: FleetConfig): FleetConfigProblem[] {
  const known = new Set<string>([...Object.keys(c.tools ?? {}), ...Object.keys(c.connectors ?? {}), ...Object.keys(c.mcpServers ?? {})]);
  for (const p of Object.values(c.profiles)) {
    for (const entry of p?.reads ?? []) {
      known.add(entry);
      const ref = parseConnectorRead(entry);
      if (ref !== null) known.add(connectorReadToolName(ref));
    }
    for (const use of p?.mcp ?? []) for (const tool of Object.keys(use.tools)) known.add(`${use.server}__${tool}`);
  }
  const roles = new Set(Object.values(c.principals ?? {}).flatMap((p) => p?.roles ?? []));
  const problems: FleetConfigProblem[] = [];
  for (const [name, ct] of Object.entries(c.caseTypes)) {
    const consent = ct?.consent;
    if (consent === undefined) continue;
    for (const key of Object.keys(consent.rules)) {
      if (!known.has(key)) problems.push({ path: pointer('caseTypes', name, 'consent', 'rules', key), message: 'names no tool, connector read, connector or MCP server of this fleet config' });
    }
    // An `ask` nobody may decide would park its task until the gate expires.
    const role = consent.role ?? 'approver';
    if (c.principals !== undefined && Object.values(consent.rules).includes('ask') && !roles.has(role)) {
      problems.push({ path: pointer('caseTypes', name, 'consent', 'role'), message: `is ${JSON.stringify(role)}, which no principal holds; an ask could never be decided` });
    }
  }
  return problems;
}

function mcpProblems(c: FleetConfig): FleetConfigProblem[] {
  const problems: FleetConfigProblem[] = [];
  for (const [name, p] of Object.entries(c.profiles)) {
    const seen = new Set<string>();
    (p?.mcp ?? []).forEach((use, i) => {
      const path = pointer('profiles', name, 'mcp', String(i), 'server');
      if (c.mcpServers?.[use.server] === undefined) problems.push({ path, message: `names MCP server ${JSON.stringify(use.server)}, which mcpServers does not declare` });
      else if (seen.has(use.server)) problems.push({ path, message: `names MCP server ${JSON.stringify(use.server)} a second time; declare all its tools in one entry` });
      seen.add(use.server);
    });
  }
  return problems;
}

/**
 * Validates a parsed config. `source` names it in the error message (a path or "inline").
 * @throws FleetConfigError listing every problem with its JSON path.
 */
export function validateFleetConfig(value: unknown, source = 'inline'): FleetConfig {
  const validate = schemaValidator('fleet-config.schema.json');
  if (!validate(value)) {
    const seen = new Set<string>();
    const problems = schemaViolations(selectedKindErrors(validate.errors ?? [], value))
      .map((v) => ({ path: v.path === '/' ? '' : v.path, message: v.message }))
      .filter((p) => !seen.has(`${p.path} ${p.message}`) && Boolean(seen.add(`${p.path} ${p.message}`)));
    throw new FleetConfigError(source, problems);
  }
  const config = value as FleetConfig;
  const problems = referenceProblems(config);
  if (problems.length > 0) throw new FleetConfigError(source, problems);
  return config;
}

/**
 * Reads and validates the fleet config at `path`.
 * @throws FleetConfigError (unreadable file, not JSON, or invalid — with JSON paths).
 */
export function loadFleetConfig(path: string): LoadedFleetConfig {
  const full = resolve(path);
  let text: string;
  try {
    text = readFileSync(full, 'utf8');
  } catch (err) {
    throw new FleetConfigError(full, [{ path: '', message: `cannot be read (${(err as NodeJS.ErrnoException).code ?? 'error'})` }]);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new FleetConfigError(full, [{ path: '', message: 'is not valid JSON' }]);
  }
  return { config: validateFleetConfig(parsed, full), baseDir: dirname(full), path: full };
}
