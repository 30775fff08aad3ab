/**
 * The envelope scope gate (K1). `authorizeToolInvocation` is the ONLY place that interprets a
 * scope; the kernel consumes its answer verbatim. Reads check `scope.reads` (`"all"` is the
 * executor posture), writes check `scope.writes`, `forbidden` beats both and also refuses
 * intrinsic tools. A read is never checked against `writes`: that is how a capability list
 * once silently narrowed an agent to writes-only.
 */
import { EverdictError } from './errors.js';
import type { RunBudget } from './budget.js';
import { connectorReadScopeNames } from './connectorRead.js';
import { isIntrinsic, type ToolDescriptor } from './tools.js';

/**
 * Entries are tool names, or a prefix ending in `*` (`crm__*`); a connector read is also named
 * by its connector or `connector/operation` (`billing`, `billing/accounts.get`, `billing/*`).
 * A scope names what a human granted; it never classifies a tool.
 */
export interface ToolScope {
  readonly reads: 'all' | readonly string[];
  readonly writes: readonly string[];
  readonly forbidden: readonly string[];
}

/** The authority a run executes under. A child run receives its parent's envelope verbatim (K4). */
export interface ExecutionEnvelope {
  readonly scope: ToolScope;
  readonly budget: RunBudget;
}

type AuthorizationRefusal = 'forbidden' | 'read_out_of_scope' | 'write_out_of_scope';

type ToolAuthorization =
  | { readonly allowed: true; readonly basis: 'intrinsic' | 'executor_posture' | 'reads' | 'writes' }
  | { readonly allowed: false; readonly refusal: AuthorizationRefusal };

export function scopeEntryMatches(entry: string, toolName: string): boolean {
  return entry.endsWith('*') ? toolName.startsWith(entry.slice(0, -1)) : entry === toolName;
}

function listed(list: readonly string[], names: readonly string[]): boolean {
  return list.some((entry) => names.some((name) => scopeEntryMatches(entry, name)));
}

/**
 * The names a scope entry may match for `tool`: its name, and for a first-party connector read
 * also its connector and `connector/operation` (so `billing/*` covers every billing read).
 */
function scopeNamesOf(tool: Pick<ToolDescriptor, 'name' | 'access' | 'origin' | 'connectorRead'>): readonly string[] {
  const read = tool.connectorRead;
  if (read === undefined || tool.origin !== 'first_party' || tool.access !== 'read') return [tool.name];
  return [tool.name, ...connectorReadScopeNames(read)];
}

export function authorizeToolInvocation(
  tool: Pick<ToolDescriptor, 'name' | 'access' | 'origin' | 'intrinsic' | 'connectorRead'>,
  envelope: { readonly scope: ToolScope },
): ToolAuthorization {
  const { scope } = envelope;
  const names = scopeNamesOf(tool);
  if (listed(scope.forbidden, names)) return { allowed: false, refusal: 'forbidden' };
  if (isIntrinsic(tool)) return { allowed: true, basis: 'intrinsic' };
  if (tool.access === 'read') {
    if (scope.reads === 'all') return { allowed: true, basis: 'executor_posture' };
    return listed(scope.reads, names) ? { allowed: true, basis: 'reads' } : { allowed: false, refusal: 'read_out_of_scope' };
  }
  return listed(scope.writes, names) ? { allowed: true, basis: 'writes' } : { allowed: false, refusal: 'write_out_of_scope' };
}

/** Shape check for scopes arriving from config or messages; the error names the field. */
export function validateToolScope(scope: unknown, field = 'scope'): ToolScope {
  const bad = (sub: string, why: string): never => {
    throw new EverdictError('invalid_scope', `${field}.${sub} ${why}`, { details: { field: `${field}.${sub}` } });
  };
  if (scope === null || typeof scope !== 'object') throw new EverdictError('invalid_scope', `${field} must be an object`, { details: { field } });
  const s = scope as Record<string, unknown>;
  const isList = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string' && x.length > 0);
  if (s.reads !== 'all' && !isList(s.reads)) bad('reads', 'must be "all" or a list of tool names');
  if (!isList(s.writes)) bad('writes', 'must be a list of tool names');
  if (!isList(s.forbidden)) bad('forbidden', 'must be a list of tool names');
  return { reads: s.reads as ToolScope['reads'], writes: s.writes as string[], forbidden: s.forbidden as string[] };
}
