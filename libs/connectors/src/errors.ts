/**
 * Connector errors. A refusal happens BEFORE any contact with the target, so it never leaves an
 * effect in doubt; unavailability means a read could not be answered and is worth retrying.
 */
import type { SchemaViolation } from '@everdict/contracts';
import { EverdictError } from '@everdict/contracts';

/** Why a connector refused a call without contacting the target. */
export const REFUSAL_REASONS = [
  'invalid_packet',
  'wrong_connector',
  'target_mismatch',
  'unregistered_operation',
  'not_a_mutation',
  'not_a_read',
  'effect_class_mismatch',
  'template_changed',
  'invalid_params',
  'unsupported_expected_count',
  'expected_count_mismatch',
  'missing_expected_count',
  'invalid_idempotency_key',
  'dry_run_unsupported',
  /** An ad-hoc read whose query is not a verified read-only SELECT (the message names why). */
  'unverified_read',
] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

/** The call was refused before contact; the target saw nothing. `details.path` names the field. */
export class ConnectorRefused extends EverdictError {
  readonly reason: RefusalReason;
  readonly violations: readonly SchemaViolation[];

  constructor(connector: string, reason: RefusalReason, violations: readonly SchemaViolation[]) {
    const first = violations[0];
    super('connector_refused', `${connector}: ${reason}${first ? ` (${first.path} ${first.message})` : ''}`, {
      details: { connector, reason, path: first?.path, violations },
    });
    this.reason = reason;
    this.violations = violations;
  }
}

/**
 * A read could not be answered (connection failure, timeout, target error). Retryable.
 * `answered`: the target itself replied, with a failure (HTTP 5xx, a transient SQLSTATE); false
 * when no reply came at all (no connection, connection lost, timeout).
 */
export class ConnectorUnavailable extends EverdictError {
  constructor(connector: string, operation: string, what: string, cause?: unknown, answered = false) {
    super('connector_down', `${connector}: ${operation} could not be read (${what})`, {
      retryable: true,
      cause,
      details: { connector, operation, what, answered },
    });
  }
}
