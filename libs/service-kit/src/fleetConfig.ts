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
import { dirname, resolve } from 'node:path';
import { EverdictError, connectorReadToolName, isValidConnectorReadToolName, parseConnectorRead, schemaValidator, schemaViolations } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';

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
    if (p.compaction?.keepRecent !== undefined && p.compaction.keepRecent >= p.compaction.maxMessages) {
      problems.push({ path: pointer('profiles', name, 'compaction', 'keepRecent'), message: 'must be smaller than maxMessages' });
    }
  }
  problems.push(...connectorReadProblems(c, tools));
  problems.push(...mcpProblems(c));
  for (const [name, ct] of Object.entries(c.caseTypes)) {
    if (!ct) continue;
    if (!profiles.has(ct.rootProfile)) problems.push({ path: pointer('caseTypes', name, 'rootProfile'), message: `names profile ${JSON.stringify(ct.rootProfile)}, which profiles does not declare` });
  }
  const b = c.runtime?.providerBackoffMs;
  if (b?.initial !== undefined && b.max !== undefined && b.max < b.initial) problems.push({ path: '/runtime/providerBackoffMs/max', message: 'must not be smaller than initial' });
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
    const problems = schemaViolations(validate.errors).map((v) => ({ path: v.path === '/' ? '' : v.path, message: v.message }));
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
