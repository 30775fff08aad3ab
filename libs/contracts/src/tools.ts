/**
 * Tool descriptors: everything the kernel knows about a tool before it runs it.
 *
 * Invariants (K2, K3, K6):
 * - A tool's access kind is DECLARED by whoever wrote its handler and says what the handler
 *   DOES. It is never inferred from the tool's name, and never from the RBAC action that says
 *   who may call it (`runs:read` does not make a shell in a live container a read).
 * - Declared effects (`dataAccess.egress`) are separate from access: a read that ships data to
 *   an external endpoint is honest about being a read and still needs consent.
 * - Only the kernel's own cognition tools are intrinsic, and only through `intrinsic(...)`
 *   applied at registry merge. A workspace capability is never intrinsic.
 */
import { EverdictError, isEverdictError } from './errors.js';

/** What the handler does to the world outside the run. */
export const TOOL_ACCESS = ['read', 'write'] as const;
export type ToolAccess = (typeof TOOL_ACCESS)[number];

/** Where data a tool touches may travel. `external` is exfiltration-shaped. */
const EGRESS_KINDS = ['none', 'internal', 'external'] as const;
export type Egress = (typeof EGRESS_KINDS)[number];

/** Declared effects of a tool, beyond its access kind. Absent means nothing declared. */
export interface ToolEffects {
  dataAccess?: { egress?: Egress };
}

/**
 * Who built the tool. `kernel`: the loop's cognition tools. `first_party`: the control plane's
 * own catalog and tools built in-process by the host (the only tools a host may attest).
 * `workspace`: anything a workspace brings, including every external MCP server.
 */
const TOOL_ORIGINS = ['kernel', 'first_party', 'workspace'] as const;
export type ToolOrigin = (typeof TOOL_ORIGINS)[number];

/** How the handler is reached. `remote` is a structural fact: data leaves the process host. */
const TOOL_TRANSPORTS = ['in_process', 'stdio', 'remote'] as const;
export type ToolTransport = (typeof TOOL_TRANSPORTS)[number];

/** Who validates arguments: the kernel (against `inputSchema`) or the tool's own server. */
const ARGUMENT_VALIDATORS = ['kernel', 'server'] as const;
export type ArgumentValidator = (typeof ARGUMENT_VALIDATORS)[number];

/** A JSON Schema object, kept opaque here: contracts do not interpret tool schemas. */
export type ToolInputSchema = Readonly<Record<string, unknown>>;

export interface ToolDescriptor {
  /** Matches TOOL_NAME_PATTERN (the intersection of the providers' function-name rules). */
  readonly name: string;
  readonly description: string;
  readonly inputSchema: ToolInputSchema;
  readonly access: ToolAccess;
  readonly effects?: ToolEffects;
  readonly origin: ToolOrigin;
  readonly transport: ToolTransport;
  readonly argumentValidation: ArgumentValidator;
  /** Declared by the tool's author: safe to run in parallel with other independent reads. */
  readonly independent?: boolean;
  /** Set only by `intrinsic(...)`. */
  readonly intrinsic?: true;
  /**
   * Declared by a first-party in-process write whose ONLY effect is held by the host and made
   * durable together with the call's recorded outcome (the turn-worker's `writes__propose`: its
   * packet and gate request commit with the turn). Such a call that left an open intent did
   * nothing, so a resumed turn runs it again instead of withholding it as `outcome_unknown`.
   */
  readonly outcomeAtomic?: true;
  /**
   * Set by the host on a first-party read that calls a registered connector read operation:
   * a scope may then name it by connector or operation (connectorRead.ts) as well as by tool
   * name. Any other tool declaring it is refused, so the mark cannot widen a workspace tool.
   */
  readonly connectorRead?: { readonly connector: string; readonly operation: string };
}

export const TOOL_NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** The kernel's cognition tools (K2). Their names reserve a slot; authority comes from `intrinsic`. */
export const INTRINSIC_TOOL_NAMES = ['todo', 'plan', 'spawn', 'read_tool_result', 'wait'] as const;
export type IntrinsicToolName = (typeof INTRINSIC_TOOL_NAMES)[number];

/** Checks a descriptor's shape; the error names the offending field. */
export function validateToolDescriptor(d: ToolDescriptor): ToolDescriptor {
  const bad = (field: string, why: string): never => {
    throw new EverdictError('invalid_tool_descriptor', `tool descriptor ${field} ${why}`, { details: { field, tool: String(d?.name) } });
  };
  if (typeof d.name !== 'string' || !TOOL_NAME_PATTERN.test(d.name)) bad('name', `must match ${TOOL_NAME_PATTERN.source}`);
  if (typeof d.description !== 'string') bad('description', 'must be a string');
  if (d.inputSchema === null || typeof d.inputSchema !== 'object' || Array.isArray(d.inputSchema)) bad('inputSchema', 'must be a JSON Schema object');
  if (!(TOOL_ACCESS as readonly string[]).includes(d.access)) bad('access', `must be one of ${TOOL_ACCESS.join('|')}`);
  if (!(TOOL_ORIGINS as readonly string[]).includes(d.origin)) bad('origin', `must be one of ${TOOL_ORIGINS.join('|')}`);
  if (!(TOOL_TRANSPORTS as readonly string[]).includes(d.transport)) bad('transport', `must be one of ${TOOL_TRANSPORTS.join('|')}`);
  if (!(ARGUMENT_VALIDATORS as readonly string[]).includes(d.argumentValidation)) bad('argumentValidation', `must be one of ${ARGUMENT_VALIDATORS.join('|')}`);
  const egress = d.effects?.dataAccess?.egress;
  if (egress !== undefined && !(EGRESS_KINDS as readonly string[]).includes(egress)) bad('effects.dataAccess.egress', `must be one of ${EGRESS_KINDS.join('|')}`);
  if (d.intrinsic !== undefined && d.origin !== 'kernel') bad('intrinsic', 'is reserved for kernel cognition tools');
  if (d.outcomeAtomic !== undefined && (d.outcomeAtomic !== true || d.origin !== 'first_party' || d.transport !== 'in_process')) {
    bad('outcomeAtomic', 'may be declared (true) only by a first-party in-process tool, whose effect the host commits with its outcome');
  }
  const cr = d.connectorRead;
  if (cr !== undefined && (d.origin !== 'first_party' || d.access !== 'read' || typeof cr.connector !== 'string' || cr.connector === '' || typeof cr.operation !== 'string' || cr.operation === '')) {
    bad('connectorRead', 'may be declared only by a first-party read, naming a connector and an operation');
  }
  return d;
}

/**
 * Marks a kernel cognition tool as intrinsic: exempt from the reads/writes scope, still
 * refusable by `forbidden`. Refuses anything that is not the kernel's own.
 */
export function intrinsic(d: ToolDescriptor): ToolDescriptor {
  if (d.origin !== 'kernel') {
    throw new EverdictError('not_intrinsic', `tool ${d.name} has origin ${d.origin}; only kernel cognition tools can be intrinsic`, { details: { field: 'origin', tool: d.name } });
  }
  return Object.freeze({ ...d, intrinsic: true as const });
}

/** Both marks are required, so a workspace descriptor that sets the flag itself gains nothing. */
export function isIntrinsic(d: Pick<ToolDescriptor, 'intrinsic' | 'origin'>): boolean {
  return d.intrinsic === true && d.origin === 'kernel';
}

/** External egress is exfiltration-shaped: such a read needs consent like a write (K3). */
export function effectsRequireConsent(effects: ToolEffects | undefined): boolean {
  return effects?.dataAccess?.egress === 'external';
}

type PermissionNeed = { required: false } | { required: true; reason: 'write' | 'consent_read' };

/**
 * Whether the permission hook must be consulted (K3). Writes always; reads only when their
 * declared effects require consent; plain reads (the agent's senses) never.
 */
export function permissionRequired(d: Pick<ToolDescriptor, 'access' | 'effects'>): PermissionNeed {
  if (d.access === 'write') return { required: true, reason: 'write' };
  if (effectsRequireConsent(d.effects)) return { required: true, reason: 'consent_read' };
  return { required: false };
}

/**
 * The code a READ throws when its server or target cannot answer — it did not start, crashed,
 * dropped the connection or timed out (`details.connector` names which). The read did not
 * complete, and nothing is the model's to judge: the kernel leaves the call's intent open and
 * suspends the run `connector_down` (health-gated backoff, never a failed task); the resumed
 * turn runs the read again under the same call id. A write that throws it is answered as a
 * tool error like any other throw: whether it landed is not the kernel's to guess.
 */
export const TOOL_UNAVAILABLE = 'connector_down';

/** The connector a read's failure says is down, or null when the failure is the tool's own. */
export function unavailableConnector(err: unknown): string | null {
  if (!isEverdictError(err, TOOL_UNAVAILABLE)) return null;
  const connector = err.details.connector;
  return typeof connector === 'string' ? connector : 'unknown';
}

/**
 * The code dispatch throws when the permission hook answers `ask` for a consent-requiring read
 * (`details.tool` names it): nobody has decided the call yet. Like `TOOL_UNAVAILABLE`, nothing
 * ran and nothing is the model's to judge — the call's intent stays open, the run suspends and
 * the task parks `consent`; the resumed turn asks the hook again under the same call id.
 */
export const CONSENT_PENDING = 'consent_pending';

/** The tool a failure says waits for consent, or null when the failure is something else. */
export function pendingConsentTool(err: unknown): string | null {
  if (!isEverdictError(err, CONSENT_PENDING)) return null;
  const tool = err.details.tool;
  return typeof tool === 'string' ? tool : 'unknown';
}
