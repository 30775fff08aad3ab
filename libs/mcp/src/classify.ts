/**
 * How a bridged MCP tool is declared to the kernel (K3, K6). Pure decisions, in priority order:
 *
 * Access
 *  1. The host author's own declaration for the tool always wins.
 *  2. A first-party server (the control plane's own catalog) declares access through
 *     registration: its `annotations.readOnlyHint` IS the declaration (baseToolReadOnly).
 *  3. A first-party tool without that annotation falls back to the name-prefix classifier —
 *     a compatibility fallback only; names carry no authority (see MINTING_READ_PATTERNS).
 *  4. A workspace server's annotations are self-claims and never skip a gate: its tools
 *     default to read (bridged tools default read-only and validate on the server side), and
 *     a self-claim can only make a tool MORE gated (`readOnlyHint: false`, `destructiveHint: true`).
 * Effects
 *  1. The author's own effects declaration always wins.
 *  2. An undeclared read from a REMOTE workspace server gets `{dataAccess:{egress:"external"}}`:
 *     the endpoint being external is a structural fact, so such a read needs consent.
 *  3. Stdio (local) servers synthesise nothing; self-claims (`openWorldHint`) change nothing.
 */
import type { ToolAccess, ToolEffects } from '@everdict/contracts';

export const SERVER_TRUSTS = ['first_party', 'workspace'] as const;
export type ServerTrust = (typeof SERVER_TRUSTS)[number];

export interface ToolDeclaration {
  readonly access: ToolAccess;
  readonly effects?: ToolEffects;
  /** May run in parallel with other independent reads. Default false. */
  readonly independent?: boolean;
}

/** The subset of MCP tool annotations the bridge looks at. */
export interface McpAnnotations {
  readonly readOnlyHint?: boolean;
  readonly destructiveHint?: boolean;
  readonly openWorldHint?: boolean;
}

const READ_PREFIXES = ['get', 'list', 'read', 'search', 'describe', 'fetch', 'query', 'find', 'show', 'view', 'lookup', 'count'];

/**
 * Names that look like reads but mint, create or hand out something. Their existence is the
 * standing proof that a name carries no authority: the fallback classifier treats them as writes.
 */
export const MINTING_READ_PATTERNS: readonly RegExp[] = [
  /(^|[_-])or[_-]create([_-]|$)/i, // get_or_create_ticket, fetch_or_create_user
  /(^|[_-])(token|tokens|credential|credentials|secret|secrets|password|api[_-]?key)s?([_-]|$)/i, // get_token, get_registry_credentials
  /(^|[_-])(issue|mint|allocate|reserve|claim|lease|lock|acquire)([_-]|$)/i, // get_lease, read_and_lock
  /(^|[_-])(exec|execute|run|invoke|trigger|shell)([_-]|$)/i, // get_exec_shell
];

/** Compatibility fallback for undeclared first-party tools: read only for a read prefix and no minting pattern. */
export function classifyByNamePrefix(toolName: string): ToolAccess {
  const words = toolName.toLowerCase().split(/[_\-.]+/).filter(Boolean);
  const first = words[0] ?? '';
  if (!READ_PREFIXES.includes(first)) return 'write';
  return MINTING_READ_PATTERNS.some((re) => re.test(toolName)) ? 'write' : 'read';
}

export type AccessBasis = 'declared' | 'registration_annotation' | 'name_fallback' | 'bridged_default' | 'self_claimed_mutation';

export function bridgedAccess(trust: ServerTrust, toolName: string, annotations: McpAnnotations | undefined, declaration: ToolDeclaration | undefined): { access: ToolAccess; basis: AccessBasis } {
  if (declaration !== undefined) return { access: declaration.access, basis: 'declared' };
  if (trust === 'first_party') {
    if (typeof annotations?.readOnlyHint === 'boolean') return { access: annotations.readOnlyHint ? 'read' : 'write', basis: 'registration_annotation' };
    return { access: classifyByNamePrefix(toolName), basis: 'name_fallback' };
  }
  if (annotations?.readOnlyHint === false || annotations?.destructiveHint === true) return { access: 'write', basis: 'self_claimed_mutation' };
  return { access: 'read', basis: 'bridged_default' };
}

export function bridgedEffectsFor(trust: ServerTrust, transport: 'stdio' | 'remote', access: ToolAccess, declaration: ToolDeclaration | undefined): ToolEffects | undefined {
  if (declaration?.effects !== undefined) return declaration.effects;
  if (trust === 'workspace' && transport === 'remote' && access === 'read') return { dataAccess: { egress: 'external' } };
  return undefined;
}
