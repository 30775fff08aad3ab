/**
 * Connector reads as agent tools (seed 004 §2.1). A profile's `reads` lists registered read
 * operations (`billing/accounts.get`); each becomes one base tool, named `billing__accounts_get`,
 * whose input schema is the operation's declared parameters and whose handler calls
 * `connector.read` — the only way an agent reaches an estate.
 *
 * Invariants:
 * - The tool is a first-party read (K3: its real access kind) and carries `connectorRead`, so a
 *   case type's scope names it by connector, operation or prefix like a write; the kernel's
 *   `authorizeToolInvocation` decides, before the handler runs, like for every tool.
 * - It reaches a target over the network (`transport: remote`) but the target is the operator's
 *   own estate, declared in the fleet config's `connectors`: `egress: internal`, so no consent is asked;
 *   an undeclared egress would be external.
 * - Reads of one turn run side by side only when the connector declares the operation
 *   independent; otherwise in recorded order (the kernel's dispatch decides from the flag).
 * - The model sees a JSON document: origin (connector, operation, target), trust `external`
 *   (the content came from a target, never from the platform), data class, the sha256 of the
 *   result's canonical form, its size in bytes, `truncated` and the result. Connectors answer
 *   whole or not at all (row and byte limits refuse instead of cutting), so `truncated` is
 *   false; a document too long to inline is stored whole by the kernel and paged through
 *   `read_tool_result` (K6).
 * - A failure the target or the connector answered is a tool error the model sees, never a
 *   crash: a refusal before contact (invalid parameters, an unverified query), a target that
 *   replied with a transient failure (HTTP 5xx, a transient SQLSTATE: retryable, the model may
 *   call again), a read too large or refused by the target. Texts are our own words (ASCII)
 *   plus the connector's safe codes.
 * - A target that gave no reply at all (no connection, connection lost, timeout) is not the
 *   model's to judge: the connector's `connector_down` error is thrown on, for the kernel to
 *   park the task on the class of that name where it does so; a kernel that does not answers
 *   it as a tool error like any throw.
 *
 * The turn-worker does not import the connectors library: the process that composes it hands
 * over the opened connector set, seen here through the slice it uses.
 */
import { AtCapacity, canonicalJson, connectorReadToolName, isEverdictError, parseConnectorRead, payloadHash, systemClock } from '@everdict/contracts';
import type { Clock, ConnectorReadRef, EffectParams, FleetConfig, ParamSpec, ToolDescriptor } from '@everdict/contracts';
import type { Tool, ToolOutput } from '@everdict/agent-runtime';
import type { ToolTiming } from './tools.js';
import { estateTarget, externalCallGate, holdGate, type ExternalCallGate, type HoldGate } from './caps.js';
import type { Db } from '@everdict/store';


/** The slice of a connector a read tool uses (a `Connector` of libs/connectors satisfies it). */
export interface ReadConnector {
  readonly name: string;
  describe(): {
    readonly kind: string;
    readonly target: { readonly system: string; readonly environment: string; readonly account?: string; readonly locator?: string };
    readonly readOperations: readonly { readonly name: string; readonly params: Readonly<Record<string, ParamSpec>>; readonly independent?: boolean }[];
  };
  read(
    operation: string,
    params: EffectParams,
    ctx: { readonly clock: Clock; readonly signal?: AbortSignal },
  ): Promise<{ readonly operation: string; readonly value: unknown; readonly observedAt: string }>;
}

/** The opened connectors (a `ConnectorSet` satisfies it). */
export interface ReadConnectors {
  get(name: string): ReadConnector | undefined;
}

/** What a connector read carries, whatever its target. */
export const CONNECTOR_READ_TRUST = 'external';
export const CONNECTOR_READ_DATA_CLASS = 'estate';

// params.ts: a string's default bound, and the UUID form it accepts.
const DEFAULT_MAX_LENGTH = 10_000;
const UUID_PATTERN = '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';

/**
 * The JSON Schema of an operation's parameters, as the connector checks them: every declared
 * parameter required, nothing else accepted, no coercion, patterns anchored.
 */
export function readInputSchema(params: Readonly<Record<string, ParamSpec>>): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(params)) properties[name] = paramSchema(spec);
  return { type: 'object', additionalProperties: false, required: Object.keys(params), properties };
}

function paramSchema(spec: ParamSpec): Record<string, unknown> {
  switch (spec.type) {
    case 'boolean':
      return { type: 'boolean' };
    case 'uuid':
      return { type: 'string', pattern: UUID_PATTERN };
    case 'integer':
    case 'number':
      return { type: spec.type, ...(spec.minimum === undefined ? {} : { minimum: spec.minimum }), ...(spec.maximum === undefined ? {} : { maximum: spec.maximum }) };
    case 'string':
      return {
        type: 'string',
        maxLength: spec.maxLength ?? DEFAULT_MAX_LENGTH,
        ...(spec.minLength === undefined ? {} : { minLength: spec.minLength }),
        ...(spec.pattern === undefined ? {} : { pattern: `^(?:${spec.pattern})$` }),
        ...(spec.enum === undefined ? {} : { enum: [...spec.enum] }),
      };
  }
}

/** The descriptor of one connector read. */
export function connectorReadDescriptor(
  ref: ConnectorReadRef,
  capability: ReturnType<ReadConnector['describe']>,
  op: ReturnType<ReadConnector['describe']>['readOperations'][number],
  description?: string,
): ToolDescriptor {
  const where = `${capability.target.system}/${capability.target.environment}`;
  return {
    name: connectorReadToolName(ref),
    description:
      description ??
      `Read ${ref.operation} from ${ref.connector} (${capability.kind}, target ${where}). Read-only; returns the target's answer with its origin and content hash.`,
    inputSchema: readInputSchema(op.params),
    access: 'read',
    effects: { dataAccess: { egress: 'internal' } },
    origin: 'first_party',
    transport: 'remote',
    argumentValidation: 'kernel',
    independent: op.independent === true,
    connectorRead: { connector: ref.connector, operation: ref.operation },
  };
}

/** The document the model is shown for a completed read. */
export function readResultDocument(ref: ConnectorReadRef, target: ReturnType<ReadConnector['describe']>['target'], value: unknown, observedAt: string): Record<string, unknown> {
  const canonical = canonicalJson(value);
  return {
    origin: { connector: ref.connector, operation: ref.operation, target: { ...target } },
    trust: CONNECTOR_READ_TRUST,
    dataClass: CONNECTOR_READ_DATA_CLASS,
    contentHash: payloadHash(value),
    bytes: Buffer.byteLength(canonical, 'utf8'),
    truncated: false,
    observedAt,
    result: value,
  };
}

const toolError = (content: string): ToolOutput => ({ content, isError: true });

/** The connector could not reach its target at all (ConnectorUnavailable without a reply). */
const noReply = (err: unknown): boolean => isEverdictError(err) && err.code === 'connector_down' && err.details['answered'] !== true;

/** What the model is told about a read that did not complete. */
export function readFailureText(ref: ConnectorReadRef, err: unknown): string {
  const name = `${ref.connector}/${ref.operation}`;
  if (!isEverdictError(err)) return `Read ${name} failed unexpectedly; nothing was changed.`;
  switch (err.code) {
    case 'connector_refused':
      return `Read ${name} was refused before contacting the target: ${err.message}. Correct the arguments and call again.`;
    case 'connector_down':
      return `Read ${name} could not be answered right now (retryable): ${err.message}. Nothing was changed; you may call it again later.`;
    case 'read_too_large':
      return `Read ${name} was refused: ${err.message}. Narrow the read and call again.`;
    case 'read_failed':
      return `Read ${name} failed on the target: ${err.message}.`;
    default:
      return `Read ${name} failed (${err.code}); nothing was changed.`;
  }
}

/** One connector read as a tool. `timing` finds the running turn's sink by task id. */
export function connectorReadTool(
  ref: ConnectorReadRef,
  connector: ReadConnector,
  deps: { readonly timing: (taskId: string) => ToolTiming | undefined; readonly description?: string; readonly admit?: ExternalCallGate; readonly sessions?: HoldGate },
): Tool | undefined {
  const capability = connector.describe();
  const op = capability.readOperations.find((o) => o.name === ref.operation);
  if (op === undefined) return undefined;
  return {
    descriptor: connectorReadDescriptor(ref, capability, op, deps.description),
    async invoke(args, ctx) {
      // A per-case call-rate cap is checked before the target is contacted: a call held back
      // parks the task `capacity` (the kernel's replay runs it later under the same call id).
      const wait = deps.admit ? await deps.admit(ctx.taskId, ctx.callId) : null;
      if (wait !== null) throw new AtCapacity(wait);
      const started = performance.now();
      // caps.estateSessions: the session this read opens on its target waits for a place.
      const read = () => connector.read(ref.operation, args as EffectParams, { clock: systemClock, ...(ctx.signal ? { signal: ctx.signal } : {}) });
      try {
        const result = deps.sessions
          ? await deps.sessions({ taskId: ctx.taskId, holder: `read:${ctx.callId}`, target: estateTarget(capability.target), ...(ctx.signal ? { signal: ctx.signal } : {}) }, read)
          : await read();
        return { content: JSON.stringify(readResultDocument(ref, capability.target, result.value, result.observedAt)) };
      } catch (err) {
        if (noReply(err)) throw err;
        return toolError(readFailureText(ref, err));
      } finally {
        deps.timing(ctx.taskId)?.addToolMs(performance.now() - started);
      }
    },
  };
}

/** Every `connector/operation` some profile of `config` lists, in first-mention order. */
export function listedReads(config: Pick<FleetConfig, 'profiles'>): string[] {
  const seen = new Set<string>();
  for (const p of Object.values(config.profiles)) for (const entry of p?.reads ?? []) seen.add(entry);
  return [...seen];
}

/**
 * The read tools of `config`, by `connector/operation`. An entry whose connector or operation
 * the set does not hold gets no tool: start-up and reload refuse such a config first
 * (the set is opened from the same `connectors` section, and a node that opened no connectors
 * refuses a config whose profiles read).
 */
export function connectorReadTools(
  config: Pick<FleetConfig, 'profiles' | 'connectors' | 'caseTypes'>,
  connectors: ReadConnectors | undefined,
  deps: { readonly timing: (taskId: string) => ToolTiming | undefined; readonly db?: Db },
): Map<string, Tool> {
  const tools = new Map<string, Tool>();
  if (connectors === undefined) return tools;
  const admit = externalCallGate(deps.db, config);
  const sessions = holdGate(deps.db, config, 'estateSessions');
  for (const entry of listedReads(config)) {
    const ref = parseConnectorRead(entry);
    const connector = ref === null ? undefined : connectors.get(ref.connector);
    if (ref === null || connector === undefined) continue;
    const description = config.connectors?.[ref.connector]?.operations[ref.operation]?.description;
    const tool = connectorReadTool(ref, connector, { timing: deps.timing, ...(description === undefined ? {} : { description }), ...(admit === undefined ? {} : { admit }), ...(sessions === undefined ? {} : { sessions }) });
    if (tool !== undefined) tools.set(entry, tool);
  }
  return tools;
}
