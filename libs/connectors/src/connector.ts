/**
 * The Connector contract (DESIGN §6, seed 004 §5 and §7): the only way the runtime touches an
 * estate. Deterministic executor code calls it — never a model.
 *
 * Failure contract, which the execution coordinator relies on:
 * - `execute` and `whatLanded` throw ONLY `ConnectorRefused`, and only before any contact with
 *   the target. Every failure after contact is a `LandedReport`: a connection lost mid-call is
 *   `unknown`, never an exception that could be mistaken for "it failed".
 * - `read` and `preflight` throw `ConnectorRefused` before contact and `ConnectorUnavailable`
 *   when the target cannot be read (retryable; park `connector_down`).
 */
import type { Clock, EffectPacket, EffectParams, EffectTarget, WhatLanded } from '@everdict/contracts';
import type { ParamSpec } from './params.js';

/** What a connector's dry run can do without mutating anything (§5: a rehearsal that writes is not a dry run). */
export type DryRunKind = 'none' | 'render' | 'inspect';

/** Per-call context. The clock stamps observations; the signal lets a draining process stop waiting. */
export interface ConnectorContext {
  readonly clock: Clock;
  readonly signal?: AbortSignal;
}

/** Identity of one journalled effect call. The idempotency key travels to the target; the call id is correlation. */
export interface CallIdentity {
  readonly callId: string;
  readonly idempotencyKey: string;
}

/** The target a connector is configured for; a packet must name the same one. */
export type TargetIdentity = Omit<EffectTarget, 'connector'>;

/** One mutating operation as the connector registers it. */
export interface OperationCapability {
  readonly name: string;
  readonly effectClass: string;
  readonly params: Readonly<Record<string, ParamSpec>>;
  readonly dryRun: DryRunKind;
  /** The operation itself is safe to repeat (e.g. a PUT of a whole value). Still never retried while `unknown`. */
  readonly idempotent: boolean;
  /** "sha256:…" of the reviewed definition; packets may pin it in `operation.templateHash`. */
  readonly templateHash: string;
  /** Counts the connector checks before committing, with their declared values when fixed. */
  readonly expectedCounts: Readonly<Record<string, number | null>>;
}

/** One registered read operation. Reads never mutate; anything undeclared is refused. */
export interface ReadOperationCapability {
  readonly name: string;
  readonly params: Readonly<Record<string, ParamSpec>>;
  readonly templateHash: string;
  /**
   * The read has no effect another call could observe, so reads of one turn may run side by
   * side. Absent: not declared, and such reads run in recorded order.
   */
  readonly independent?: boolean;
}

/** A connector's capability description: what it can do and how much its answers can be trusted. */
export interface ConnectorCapability {
  readonly connector: string;
  readonly kind: string;
  readonly target: TargetIdentity;
  readonly operations: readonly OperationCapability[];
  readonly readOperations: readonly ReadOperationCapability[];
  /**
   * WhatLanded can tell absence from uncertainty: `not_applied` from this connector is proof.
   * When false, the connector is never retried automatically (§7).
   */
  readonly whatLandedConclusive: boolean;
  /** How WhatLanded is established, in words (receipt table, receipt endpoint…). */
  readonly whatLandedMethod: string;
}

/** A JSON value as reads return it. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [k: string]: JsonValue };

/** Connector-defined receipt: target ids, request ids, counts. JSON only. */
export type Receipt = { readonly [k: string]: JsonValue };

/**
 * What landed, and how that was established. `reason` is a stable code for anything other than
 * a clean `applied` (e.g. `http_422`, `row_count_mismatch`, `connection_lost`).
 */
export interface LandedReport {
  readonly outcome: WhatLanded;
  readonly established: string;
  readonly reason?: string;
  readonly receipt?: Receipt;
  /** When the connector observed this answer (from the context clock). */
  readonly observedAt: string;
}

export interface ReadResult {
  readonly operation: string;
  readonly value: JsonValue;
  readonly observedAt: string;
}

/** One check whose observed value differs from the packet's. Values are kept for the audit trail. */
export interface CheckMismatch {
  readonly id: string;
  readonly pointer: string;
  readonly expected: JsonValue;
  /** `undefined` when the pointer does not resolve in the read result. */
  readonly observed: JsonValue | undefined;
}

export type CheckOutcome =
  | { readonly status: 'holds'; readonly checked: readonly string[] }
  | { readonly status: 'violated'; readonly checked: readonly string[]; readonly mismatches: readonly CheckMismatch[] };

/**
 * Preflight answer. `preflight_changed` invalidates the packet: the effect returns to planning
 * and needs a new approved packet (§5).
 */
export type PreflightResult =
  | { readonly status: 'unchanged'; readonly checked: readonly string[] }
  | { readonly status: 'preflight_changed'; readonly checked: readonly string[]; readonly changed: readonly CheckMismatch[] };

export interface DryRunResult {
  readonly kind: Exclude<DryRunKind, 'none'>;
  /** The exact request or statement that execute would send, without sending it. */
  readonly rendered: JsonValue;
}

export interface Connector {
  readonly name: string;
  describe(): ConnectorCapability;
  /** Runs a registered read operation. */
  read(operation: string, params: EffectParams, ctx: ConnectorContext): Promise<ReadResult>;
  /** Admits the packet (before contact) and re-reads its preconditions. */
  preflight(packet: EffectPacket, ctx: ConnectorContext): Promise<PreflightResult>;
  /** Renders what execute would send; refuses when the operation's dry-run kind is `none`. */
  dryRun(packet: EffectPacket, ctx: ConnectorContext): Promise<DryRunResult>;
  /** Performs the permitted operation once under the call's idempotency key. */
  execute(packet: EffectPacket, call: CallIdentity, ctx: ConnectorContext): Promise<LandedReport>;
  /** Establishes what landed for an earlier execute with the same idempotency key. */
  whatLanded(packet: EffectPacket, call: CallIdentity, ctx: ConnectorContext): Promise<LandedReport>;
  /** Releases connections. */
  close(): Promise<void>;
}
