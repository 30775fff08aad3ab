/**
 * Connector reads as agent tools: how a registered read operation (`billing/accounts.get`) is
 * named for a model and for a case type's scope.
 *
 * Invariants:
 * - A profile names a read as `connector/operation`; the split is at the FIRST slash (connector
 *   names never contain one, operation names may).
 * - The tool name is derived, never configured: provider function names allow only
 *   [A-Za-z0-9_-], so `connector__operation` with every other character replaced by `_`
 *   (`billing__accounts_get`, as `writes__propose` spells `writes.propose`). Two reads whose
 *   derived names collide are a config problem, never a silent merge.
 * - A scope names a connector read the way it names a write: by connector (`billing`), by
 *   operation (`billing/accounts.get`) or by a prefix (`billing/*`), besides the tool name.
 */
import { TOOL_NAME_PATTERN } from './tools.js';

/** The connector and operation a read tool calls. */
export interface ConnectorReadRef {
  readonly connector: string;
  readonly operation: string;
}

/** `connector/operation` → its parts; null when the entry has no connector or no operation. */
export function parseConnectorRead(entry: string): ConnectorReadRef | null {
  const slash = entry.indexOf('/');
  if (slash <= 0 || slash === entry.length - 1) return null;
  return { connector: entry.slice(0, slash), operation: entry.slice(slash + 1) };
}

/** The provider-safe tool name of a connector read; check it with TOOL_NAME_PATTERN (length). */
export function connectorReadToolName(ref: ConnectorReadRef): string {
  return `${ref.connector}__${ref.operation}`.replace(/[^A-Za-z0-9_-]/g, '_');
}

/** Whether the derived name is a valid tool name (it may be too long). */
export function isValidConnectorReadToolName(ref: ConnectorReadRef): boolean {
  return TOOL_NAME_PATTERN.test(connectorReadToolName(ref));
}

/** The names a scope entry may match for this read, besides the tool name itself. */
export function connectorReadScopeNames(ref: ConnectorReadRef): readonly string[] {
  return [ref.connector, `${ref.connector}/${ref.operation}`];
}

/** The value types a connector operation's parameter may declare. */
export const PARAM_TYPES = ['string', 'integer', 'number', 'boolean', 'uuid'] as const;
export type ParamType = (typeof PARAM_TYPES)[number];

/**
 * A declared parameter of a registered connector operation: what the connector checks bound
 * values against, and what a connector read offers the model as its input schema.
 */
export interface ParamSpec {
  readonly type: ParamType;
  /** Inclusive bounds for integer and number. */
  readonly minimum?: number;
  readonly maximum?: number;
  /** Bounds for string. maxLength defaults to 10 000 (the packet schema's limit). */
  readonly minLength?: number;
  readonly maxLength?: number;
  /** Anchored by the check: the whole value must match. */
  readonly pattern?: string;
  /** Allowed string values. */
  readonly enum?: readonly string[];
}
