/**
 * Admission: the pure checks every connector runs BEFORE contacting its target. A packet that
 * names another connector or target, an unregistered operation, a changed template, unbound or
 * out-of-bound parameters, or counts the connector cannot check is refused here, so the target
 * never sees a request outside what was approved.
 */
import type { EffectPacket, EffectParams, EffectTarget, SchemaViolation } from '@everdict/contracts';
import { validatePacket } from '@everdict/contracts';
import type { ConnectorCapability, OperationCapability, ReadOperationCapability, TargetIdentity } from './connector.js';
import type { RefusalReason } from './errors.js';
import { ConnectorRefused } from './errors.js';
import { paramViolations } from './params.js';

function refuse(capability: ConnectorCapability, reason: RefusalReason, path: string, message: string): never {
  throw new ConnectorRefused(capability.connector, reason, [{ path, message }]);
}

/**
 * Fields of the configured identity that the packet's target must repeat exactly. `account` and
 * `locator` bind only when the connector is configured with them: a packet may narrow a
 * multi-account connector, never widen a single-account one.
 */
function targetMismatch(configured: TargetIdentity, target: EffectTarget): SchemaViolation | undefined {
  for (const field of ['system', 'environment', 'account', 'locator'] as const) {
    const want = configured[field];
    if (want !== undefined && target[field] !== want) return { path: `/target/${field}`, message: 'is not the target this connector is configured for' };
  }
  return undefined;
}

/** The packet is for this connector and its target. Enough for WhatLanded, which must answer even after a template change. */
export function admitTarget(capability: ConnectorCapability, packet: EffectPacket): void {
  if (packet.operation.connector !== capability.connector) refuse(capability, 'wrong_connector', '/operation/connector', `is not ${capability.connector}`);
  if (packet.target.connector !== capability.connector) refuse(capability, 'wrong_connector', '/target/connector', `is not ${capability.connector}`);
  const mismatch = targetMismatch(capability.target, packet.target);
  if (mismatch !== undefined) throw new ConnectorRefused(capability.connector, 'target_mismatch', [mismatch]);
}

/** A registered read with exactly bound parameters. */
export function admitRead(capability: ConnectorCapability, operation: string, params: EffectParams, at = ''): ReadOperationCapability {
  const read = capability.readOperations.find((r) => r.name === operation);
  if (read === undefined) {
    const isMutation = capability.operations.some((o) => o.name === operation);
    refuse(capability, isMutation ? 'not_a_read' : 'unregistered_operation', `${at}/operation`, isMutation ? 'is a mutation, not a read' : 'is not a registered read operation');
  }
  const violations = paramViolations(read.params, params, `${at}/params`);
  if (violations.length > 0) throw new ConnectorRefused(capability.connector, 'invalid_params', violations);
  return read;
}

/**
 * Full admission for preflight, dry run and execute: schema and digest invariants, connector and
 * target, operation, effect class, template hash, parameters, expected counts, and the reads
 * its preconditions and assertions use. Returns the operation and the counts to enforce.
 */
export function admitPacket(capability: ConnectorCapability, packet: EffectPacket): { operation: OperationCapability; expectedCounts: Record<string, number> } {
  const validation = validatePacket(packet);
  if (!validation.ok) throw new ConnectorRefused(capability.connector, 'invalid_packet', validation.violations);
  admitTarget(capability, packet);

  const operation = capability.operations.find((o) => o.name === packet.operation.name);
  if (operation === undefined) {
    const isRead = capability.readOperations.some((r) => r.name === packet.operation.name);
    refuse(capability, isRead ? 'not_a_mutation' : 'unregistered_operation', '/operation/name', isRead ? 'is a read, not a mutation' : 'is not a registered operation');
  }
  if (packet.effectClass !== operation.effectClass) refuse(capability, 'effect_class_mismatch', '/effectClass', `must be ${operation.effectClass} for this operation`);
  if (packet.operation.templateHash !== undefined && packet.operation.templateHash !== operation.templateHash) {
    refuse(capability, 'template_changed', '/operation/templateHash', 'the reviewed template has changed since the packet was prepared');
  }
  const violations = paramViolations(operation.params, packet.params, '/params');
  if (violations.length > 0) throw new ConnectorRefused(capability.connector, 'invalid_params', violations);

  const expectedCounts = effectiveExpectedCounts(capability, operation, packet);
  packet.preconditions.forEach((c, i) => admitRead(capability, c.read.operation, c.read.params, `/preconditions/${i}/read`));
  packet.assertions.forEach((c, i) => admitRead(capability, c.read.operation, c.read.params, `/assertions/${i}/read`));
  return { operation, expectedCounts };
}

/**
 * The counts execute must enforce: the packet's, which must agree with any the template fixes;
 * a count the template leaves open (null) must be stated by the packet; a count the connector
 * cannot check is refused rather than silently ignored.
 */
function effectiveExpectedCounts(capability: ConnectorCapability, operation: OperationCapability, packet: EffectPacket): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const [name, value] of Object.entries(packet.expectedCounts)) {
    if (value === undefined) continue;
    if (!Object.hasOwn(operation.expectedCounts, name)) refuse(capability, 'unsupported_expected_count', `/expectedCounts/${name}`, 'is not a count this operation can check');
    const fixed = operation.expectedCounts[name];
    if (fixed !== null && fixed !== undefined && fixed !== value) refuse(capability, 'expected_count_mismatch', `/expectedCounts/${name}`, `must be ${fixed} for this template`);
    counts[name] = value;
  }
  for (const [name, fixed] of Object.entries(operation.expectedCounts)) {
    if (Object.hasOwn(counts, name)) continue;
    if (fixed === null) refuse(capability, 'missing_expected_count', `/expectedCounts/${name}`, 'must be stated: the template does not fix it');
    counts[name] = fixed;
  }
  return counts;
}

// Visible ASCII only: the key travels as an HTTP header value and a database key.
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

export function admitIdempotencyKey(capability: ConnectorCapability, key: string): void {
  if (!IDEMPOTENCY_KEY.test(key)) refuse(capability, 'invalid_idempotency_key', '/idempotencyKey', 'must be 1-255 visible ASCII characters');
}
