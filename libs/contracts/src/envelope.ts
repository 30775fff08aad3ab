/**
 * Building and decoding message envelopes (DESIGN §3, seed 004 §4).
 *
 * Senders: the model proposes only a business payload; `buildEnvelope` stamps everything else
 * (id, payloadHash, createdAt) and refuses a payload its schema rejects, so nothing invalid
 * reaches the outbox.
 *
 * Receivers: `decodeMessage` is the edge pipeline, in this order and nothing else first:
 *   size limit → UTF-8 JSON parse → envelope schema → known type → known version → payload
 *   schema → recomputed payloadHash equals the stamped one.
 * A failure is a value (never a throw) carrying a stable reason, a detail that names the failing
 * field without echoing payload content, and whatever ids could be salvaged for the dead-letter
 * record. Authentication of the sender against persisted assignments is the receiver's job (§4):
 * a decoded envelope is well-formed, not trusted.
 */
import { canonicalJson, payloadHash } from './canonical.js';
import type { Clock } from './clock.js';
import { EverdictError } from './errors.js';
import type { MessageEnvelope, MessageLineage, MessageSender } from './generated/index.js';
import { ENVELOPE_SCHEMA_FILE } from './generated/index.js';
import { newId } from './ids.js';
import type { AnyEnvelope, CurrentVersion, Envelope, MessageType, PayloadOf, VersionOf } from './messages.js';
import { isMessageType, payloadContract, supportedVersions } from './messages.js';
import type { SchemaViolation } from './schema-registry.js';
import { describeViolations, schemaValidator, schemaViolations } from './schema-registry.js';
import type { TrustLabel } from './states.js';

/** Why decodeMessage refused a message, in pipeline order. */
export const DECODE_REASONS = [
  'oversized',
  'malformed_json',
  'invalid_envelope',
  'unknown_type',
  'unknown_version',
  'invalid_payload',
  'hash_mismatch',
] as const;
export type DecodeReason = (typeof DECODE_REASONS)[number];

export type DecodeResult =
  | { readonly ok: true; readonly envelope: AnyEnvelope }
  | {
      readonly ok: false;
      readonly reason: DecodeReason;
      /** Names the failing field or rule; never contains payload content. */
      readonly detail: string;
      /** Best-effort ids from whatever parsed, present only when well-formed (for dead-letter records). */
      readonly messageId?: string;
      readonly type?: string;
      readonly version?: number;
      readonly caseId?: string;
      readonly payloadHash?: string;
      /**
       * `payload.taskId` when it is a well-formed id: the task a message of an unknown type or
       * version is for (the receiver looks it up in the case; nothing else of the payload is read).
       */
      readonly targetTaskId?: string;
    };

type DecodeFailure = Extract<DecodeResult, { ok: false }>;

interface DecodeOptions {
  /** Largest accepted message in bytes; checked before anything is parsed. No default: each consumer states its limit. */
  readonly maxBytes: number;
}

/** A sensible consumer limit (1 MiB): large results travel as papers, not in messages. */
export const DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024;

/** What a sender supplies; the runtime stamps id, payloadHash and createdAt. */
interface EnvelopeDraft<T extends MessageType, V extends VersionOf<T>> {
  readonly type: T;
  readonly version: V;
  readonly caseId: string;
  readonly lineage: MessageLineage;
  readonly sender: MessageSender;
  readonly trust: TrustLabel;
  readonly payload: PayloadOf<T, V>;
  readonly traceparent?: string;
}

const envelopeValidator = () => schemaValidator(ENVELOPE_SCHEMA_FILE);

/**
 * Lineage invariant the schema cannot express: parentTaskId is null exactly when ancestry is
 * empty, and otherwise is the last ancestry entry (ancestry runs root → parent).
 */
function lineageViolation(lineage: MessageLineage): SchemaViolation | undefined {
  const last = lineage.ancestry.at(-1);
  if (lineage.parentTaskId === null && last !== undefined) {
    return { path: '/lineage/parentTaskId', message: 'must equal the last ancestry entry (it is null but ancestry is not empty)' };
  }
  if (lineage.parentTaskId !== null && last !== lineage.parentTaskId) {
    return { path: '/lineage/ancestry', message: 'must end with parentTaskId' };
  }
  return undefined;
}

/**
 * Stamps and validates an envelope. The payload is copied through its canonical form, so later
 * changes to the caller's object cannot make the envelope disagree with its payloadHash.
 *
 * @throws EverdictError `unknown_type` | `unknown_version` | `invalid_payload` | `invalid_envelope`
 *   (details.path names the first failing field; details.violations lists all of them).
 */
export function buildEnvelope<T extends MessageType, V extends VersionOf<T> = CurrentVersion<T>>(draft: EnvelopeDraft<T, V>, clock: Clock): Envelope<T, V> {
  const { type, version } = draft;
  if (!isMessageType(type)) {
    throw new EverdictError('unknown_type', `message type ${JSON.stringify(String(type))} is not registered`, { details: { path: '/type', type } });
  }
  const contract = payloadContract(type, version);
  if (contract === undefined) {
    throw new EverdictError('unknown_version', `${type} has no payload schema version ${String(version)}`, {
      details: { path: '/version', type, version, supported: supportedVersions(type) },
    });
  }

  let payload: unknown;
  try {
    payload = JSON.parse(canonicalJson(draft.payload));
  } catch (err) {
    throw new EverdictError('invalid_payload', `${type} v${version} payload has no RFC 8785 canonical JSON form`, {
      cause: err,
      details: { path: '/payload', type, version },
    });
  }
  if (!contract.validate(payload)) {
    const violations = schemaViolations(contract.validate.errors, '/payload');
    throw new EverdictError('invalid_payload', `${type} v${version} payload is invalid: ${describeViolations(violations)}`, {
      details: { path: violations[0]?.path ?? '/payload', type, version, violations },
    });
  }

  const envelope: MessageEnvelope = {
    id: newId(),
    type,
    version,
    caseId: draft.caseId,
    lineage: { rootCaseId: draft.lineage.rootCaseId, parentTaskId: draft.lineage.parentTaskId, ancestry: [...draft.lineage.ancestry] },
    sender: { ...draft.sender },
    trust: draft.trust,
    payloadHash: payloadHash(payload),
    ...(draft.traceparent === undefined ? {} : { traceparent: draft.traceparent }),
    createdAt: clock.now().toISOString(),
    payload: payload as MessageEnvelope['payload'],
  };
  const validateEnvelope = envelopeValidator();
  const violations = validateEnvelope(envelope) ? [] : schemaViolations(validateEnvelope.errors);
  const lineageProblem = violations.length === 0 ? lineageViolation(envelope.lineage) : undefined;
  if (lineageProblem !== undefined) violations.push(lineageProblem);
  if (violations.length > 0) {
    throw new EverdictError('invalid_envelope', `${type} v${version} envelope is invalid: ${describeViolations(violations)}`, {
      details: { path: violations[0]?.path ?? '/', type, version, violations },
    });
  }
  return envelope as unknown as Envelope<T, V>;
}

/** Any envelope-shaped value: a typed `Envelope<T, V>`, an `AnyEnvelope` or a raw `MessageEnvelope`. */
type EnvelopeLike = Omit<MessageEnvelope, 'type' | 'version' | 'payload'> & { type: string; version: number; payload: object };

/** The wire bytes of an envelope: its RFC 8785 canonical JSON, UTF-8 encoded. */
export function encodeEnvelope(envelope: EnvelopeLike): Buffer {
  return Buffer.from(canonicalJson(envelope), 'utf8');
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const TYPE_NAME = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;
const PAYLOAD_HASH = /^sha256:[0-9a-f]{64}$/;

/** Ids worth recording in a dead-letter row: only values that are well-formed, never raw input. */
function salvageIds(value: unknown): Pick<DecodeFailure, 'messageId' | 'type' | 'version' | 'caseId' | 'payloadHash' | 'targetTaskId'> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return {};
  const v = value as Record<string, unknown>;
  const out: { messageId?: string; type?: string; version?: number; caseId?: string; payloadHash?: string; targetTaskId?: string } = {};
  if (typeof v['payloadHash'] === 'string' && PAYLOAD_HASH.test(v['payloadHash'])) out.payloadHash = v['payloadHash'];
  const payload = v['payload'];
  if (typeof payload === 'object' && payload !== null && !Array.isArray(payload)) {
    const taskId = (payload as Record<string, unknown>)['taskId'];
    if (typeof taskId === 'string' && UUID.test(taskId)) out.targetTaskId = taskId;
  }
  if (typeof v['id'] === 'string' && UUID.test(v['id'])) out.messageId = v['id'];
  if (typeof v['type'] === 'string' && v['type'].length <= 64 && TYPE_NAME.test(v['type'])) out.type = v['type'];
  if (typeof v['version'] === 'number' && Number.isSafeInteger(v['version'])) out.version = v['version'];
  if (typeof v['caseId'] === 'string' && UUID.test(v['caseId'])) out.caseId = v['caseId'];
  return out;
}

function fail(reason: DecodeReason, detail: string, parsed?: unknown): DecodeFailure {
  return { ok: false, reason, detail, ...salvageIds(parsed) };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Decodes wire bytes through the whole edge pipeline (see the module comment for the order). */
export function decodeMessage(bytes: Uint8Array, opts: DecodeOptions): DecodeResult {
  // A NaN or negative limit would silently disable the first gate; that is a wiring bug, not input.
  if (!Number.isSafeInteger(opts.maxBytes) || opts.maxBytes <= 0) throw new RangeError('decodeMessage: maxBytes must be a positive integer');
  if (bytes.byteLength > opts.maxBytes) {
    return fail('oversized', `message is ${bytes.byteLength} bytes; the limit is ${opts.maxBytes}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(utf8.decode(bytes));
  } catch (err) {
    // The parser's own message quotes the input, so it is not passed on.
    const what = err instanceof SyntaxError ? 'is not valid JSON' : 'is not valid UTF-8';
    return fail('malformed_json', `message body (${bytes.byteLength} bytes) ${what}`);
  }
  return checkEnvelope(parsed);
}

/**
 * The pipeline after parsing, for a value that is already a JavaScript object (e.g. handed over
 * in-process): envelope schema → known type → known version → payload schema → payloadHash.
 */
export function checkEnvelope(parsed: unknown): DecodeResult {
  const validateEnvelope = envelopeValidator();
  if (!validateEnvelope(parsed)) {
    return fail('invalid_envelope', describeViolations(schemaViolations(validateEnvelope.errors)), parsed);
  }
  const envelope = parsed as MessageEnvelope;
  const lineageProblem = lineageViolation(envelope.lineage);
  if (lineageProblem !== undefined) return fail('invalid_envelope', describeViolations([lineageProblem]), parsed);

  if (!isMessageType(envelope.type)) {
    return fail('unknown_type', `/type ${JSON.stringify(envelope.type)} is not a registered message type`, parsed);
  }
  const contract = payloadContract(envelope.type, envelope.version);
  if (contract === undefined) {
    const supported = supportedVersions(envelope.type).join(', ');
    return fail('unknown_version', `/version ${envelope.version} is not supported for ${envelope.type} (supported: ${supported})`, parsed);
  }
  if (!contract.validate(envelope.payload)) {
    return fail('invalid_payload', describeViolations(schemaViolations(contract.validate.errors, '/payload')), parsed);
  }
  let recomputed: string;
  try {
    recomputed = payloadHash(envelope.payload);
  } catch (_err) {
    // Only unrepresentable strings (lone surrogates) get here; JSON.parse output is otherwise canonicalisable.
    return fail('invalid_payload', '/payload has no RFC 8785 canonical form', parsed);
  }
  if (recomputed !== envelope.payloadHash) {
    return fail('hash_mismatch', '/payloadHash does not equal the sha256 of the canonical payload', parsed);
  }
  return { ok: true, envelope: envelope as unknown as AnyEnvelope };
}

/** Who stamps a message: a task's turn (the model's run) or a service acting on no task's behalf. */
export type TrustStamper = 'task' | 'service';

/**
 * The trust label of a message, from where its CONTENT really came from (seed 004 §4), never
 * from who relays it. One decision for every sender, so a new message kind is labelled here:
 * - `agent`: the payload carries model-written content — a child's plan (`plan.submitted`), a
 *   question (`question.raised`), a parent agent's answer (`question.answered` from a task), a
 *   proposal's packet (`gate.requested`), a task's report (`task.finished`, except a
 *   cancellation, whose summary the runtime writes);
 * - `external`: the payload carries content from outside the platform — an effect outcome
 *   with the target's receipt (`effect.outcome` with `receipt`);
 * - `platform`: only messages the runtime makes itself — nudges (`task.runnable`), gate
 *   decisions, operator controls and answers entered through the intake (authenticated
 *   principals, not model output), an outcome without a receipt, a DeadEnd (`task.dead_end`,
 *   written by the runtime about a message it could not understand).
 * The payload is read only for the fields named above; an unknown shape is never `platform`
 * when it could carry content: a task-stamped message of a kind not listed is `agent`.
 */
export function trustLabelFor(type: MessageType, payload: unknown, stamper: TrustStamper): TrustLabel {
  const p = (payload ?? {}) as { outcome?: unknown; receipt?: unknown };
  switch (type) {
    case 'task.runnable':
    case 'gate.decided':
    case 'task.cancel':
    case 'task.resume':
    case 'budget.topped_up':
    case 'task.dead_end':
      return 'platform';
    case 'plan.submitted':
    case 'question.raised':
    case 'gate.requested':
      return 'agent';
    case 'question.answered':
      return stamper === 'task' ? 'agent' : 'platform';
    case 'task.finished':
      return p.outcome === 'cancelled' ? 'platform' : 'agent';
    case 'effect.outcome':
      return p.receipt !== undefined && p.receipt !== null ? 'external' : 'platform';
    default:
      return stamper === 'task' ? 'agent' : 'platform';
  }
}
