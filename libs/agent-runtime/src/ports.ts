/**
 * The kernel's ports. The kernel depends on contracts + llm only; durability, permission,
 * result storage, time and sub-agent placement reach it through these interfaces, which the
 * turn-worker implements on Postgres/RabbitMQ and the in-memory module implements for tests.
 */
import type { CallStatus, Clock, ExecutionEnvelope, ExecutionMode, ParkReason, ToolEffects } from '@everdict/contracts';
import type { ModelClient, ModelRequest, RouteIdentity } from '@everdict/llm';
import type { RunState, Settlement } from './state.js';

/** Model transport: the route's client. The kernel calls `complete` and decides retries. */
export type ModelTransport = ModelClient;

/** Time for active-minute accounting and retry backoff; never used for leases. */
export interface KernelClock extends Clock {
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

// ---------------------------------------------------------------- journal (RUNTIME_CALLS)

export interface JournalKey {
  readonly taskId: string;
  readonly turn: number;
  /** 0 is the model call; tool calls are 1..n in the order the action document lists them. */
  readonly ordinal: number;
}

export interface CallIntent extends JournalKey {
  /** Allocated by the runtime before dispatch; a model-generated id is never the dedup key. */
  readonly callId: string;
  readonly kind: 'model' | 'tool';
  /** Route name for a model call, tool name for a tool call. */
  readonly name: string;
  /** Exact request as JSON (the request paper's content). */
  readonly request: unknown;
  /** `sha256:` of the canonical request. */
  readonly requestHash: string;
}

export interface CallOutcome {
  readonly status: Exclude<CallStatus, 'intent'>;
  readonly response: unknown;
  readonly responseHash: string;
}

export interface CallRecord extends CallIntent {
  readonly status: CallStatus;
  readonly response: unknown | null;
  readonly responseHash: string | null;
}

/**
 * The durable call journal. Invariants the implementation must keep:
 * - (taskId, turn, ordinal) is unique; `recordIntent` on an existing key changes nothing and
 *   returns the existing record (first intent wins), so a resumed turn finds what happened;
 * - `recordOutcome` moves a record out of `intent` once; the same outcome again is a no-op,
 *   a different outcome for a settled record is refused (throws). One exception: a MODEL call
 *   recorded `failed` produced no response, so a later attempt of the same turn may record its
 *   outcome over it (the model is re-asked only when no response was ever persisted);
 * - an outcome is durable before the kernel feeds its result onward.
 */
export interface Journal {
  recordIntent(intent: CallIntent): Promise<CallRecord>;
  recordOutcome(key: JournalKey & { readonly callId: string }, outcome: CallOutcome): Promise<void>;
  /**
   * A call the kernel withholds on its own decision (the action document, scope, shadow mode),
   * recorded already settled: nothing runs, so no open intent has to be durable before it. The
   * first-intent rule holds: a record already under the key is returned unchanged — what the
   * journal holds is the answer, never re-decided. The outcome is durable no later than the
   * turn's other outcomes.
   */
  recordWithheld(intent: CallIntent, outcome: CallOutcome): Promise<CallRecord>;
  /**
   * Optional: `payloadHash(requestDoc)` of a model request document `{ route, request }`, from a
   * journal that can compute it cheaper (e.g. from cached canonical forms of the messages, which
   * every turn's request repeats). It MUST equal payloadHash of the same document; absent, the
   * kernel computes it itself.
   */
  requestHash?(requestDoc: { readonly route: RouteIdentity; readonly request: ModelRequest }): string;
}

// ---------------------------------------------------------------- permission (K3)

export interface PermissionRequest {
  readonly taskId: string;
  readonly turn: number;
  readonly callId: string;
  readonly tool: string;
  readonly arguments: Readonly<Record<string, unknown>>;
  /** The REAL declared access kind of the handler, never derived from an RBAC action. */
  readonly isReadOnly: boolean;
  readonly reason: 'write' | 'consent_read';
  readonly effects: ToolEffects | null;
}

/**
 * `deny` is answered to the model as a kernel refusal: `permission_denied` unless the hook names
 * `consent_denied` (a consent-requiring read whose consent was refused, expired or ruled out).
 * `ask` (consent-requiring reads only; a write asked is refused): no decision exists yet — the
 * call is NOT run, its intent stays open and the run suspends (park `consent`) until someone
 * decides; the resumed turn asks the hook again under the same call id.
 */
export type PermissionDecision =
  | { readonly decision: 'allow' }
  | { readonly decision: 'deny'; readonly reason?: string; readonly refusal?: 'permission_denied' | 'consent_denied' }
  | { readonly decision: 'ask' };

/** Consulted only for writes and consent-requiring reads; it never bounds a run (that is ExecutionMode). */
export interface PermissionHook {
  request(req: PermissionRequest): Promise<PermissionDecision>;
}

// ---------------------------------------------------------------- result store (K6)

export interface ResultPage {
  readonly text: string;
  readonly offset: number;
  readonly total: number;
  /** null when this page reaches the end. */
  readonly nextOffset: number | null;
}

/** Large tool results are offloaded here and paged back through `read_tool_result`. */
export interface ResultStore {
  /** Stores the full result; returns an opaque reference. Same (taskId, callId) → same ref. */
  put(owner: { readonly taskId: string; readonly callId: string }, content: string): Promise<string>;
  /** A page of a stored result, or null when the ref is unknown or not readable by `taskId`. */
  read(taskId: string, ref: string, offset: number, limit: number): Promise<ResultPage | null>;
}

// ---------------------------------------------------------------- handoff (K5)

export const HANDOFF_FATES = ['published', 'failed', 'absent'] as const;
export type HandoffFate = (typeof HANDOFF_FATES)[number];

/** What a halted run owes its successor: the state to resume from and why it stopped. */
export interface Handoff {
  readonly taskId: string;
  readonly parkReason: ParkReason;
  readonly cause: string;
  readonly state: RunState;
}

/** The host publishes the checkpoint and reports what really happened to it. */
export interface HandoffPort {
  publish(handoff: Handoff): Promise<Exclude<HandoffFate, 'absent'>>;
}

// ---------------------------------------------------------------- sub-agents (K4)

export interface SpawnRequest {
  readonly parentTaskId: string;
  /** Journal id of the spawn call: a child placement is idempotent on it. */
  readonly spawnCallId: string;
  readonly objective: string;
  /** Names in the child's registry: parent's read-only tools ∩ parent's scope (∩ what was asked). */
  readonly toolNames: readonly string[];
  /** The parent's envelope, verbatim. */
  readonly envelope: ExecutionEnvelope;
  /** The parent's mode, verbatim (absent = live). */
  readonly mode: ExecutionMode | undefined;
  readonly depth: number;
  /**
   * Papers and grants the spawn asks for, as the model named them (absent: it named none). The
   * host narrows them to what the parent itself holds — a child never gets more than its parent.
   */
  readonly papers?: readonly string[];
  readonly grants?: readonly string[];
}

export type SpawnOutcome =
  /** Ran to settlement in-process. */
  | { readonly kind: 'settled'; readonly childTaskId: string; readonly settlement: Settlement }
  /** Placed as a durable child task; the parent parks `children` until it reports. */
  | { readonly kind: 'deferred'; readonly childTaskId: string };

export interface SubAgentPort {
  spawn(req: SpawnRequest): Promise<SpawnOutcome>;
}
