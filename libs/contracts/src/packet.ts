/**
 * Effect packets (DESIGN §6, seed 004 §2.2 and §5): the digest decisions bind to, the semantic
 * hash mutation identity uses, and validation. Pure: no I/O, no clock.
 *
 * Two hashes, two jobs:
 * - `packetDigest` covers everything a decision maker approved — every field except the digest
 *   itself, grant ids, verdicts and timestamps. Attaching grants or verdicts later never changes
 *   it, which removes the circularity between a packet asking for a grant and a grant bound to
 *   the packet. Any other change (a parameter, the target, an assertion, the revert) does.
 * - `semanticPacketHash` covers only what the effect DOES: which operation, on which target,
 *   with which bound parameters. Re-planning (a new plan revision), refreshed preconditions or
 *   reworded prose leave it unchanged, so a re-proposal of the same change maps onto the same
 *   mutation key and returns the recorded receipt instead of creating a second operation.
 */
import { canonicalJson, sha256Hex } from './canonical.js';
import { EverdictError } from './errors.js';
import type { EffectPacket } from './generated/index.js';
import type { SchemaViolation } from './schema-registry.js';
import { schemaValidator, schemaViolations } from './schema-registry.js';

/** The packet schema (relative to schemas/). */
export const PACKET_SCHEMA_FILE = 'effect-packet.schema.json';

/**
 * Fields the digest never covers. Every timestamp of the packet is listed here; adding a field
 * to this list changes every digest, so it is a new `packetVersion`.
 */
export const DIGEST_EXCLUDED_FIELDS = ['digest', 'grantIds', 'verdicts', 'createdAt'] as const;
type DigestExcludedField = (typeof DIGEST_EXCLUDED_FIELDS)[number];

/** The approved content of a packet: what the digest covers. */
type PacketContent = Omit<EffectPacket, DigestExcludedField>;

/** A packet carrying its digest. */
type SealedPacket = EffectPacket & { readonly digest: string };

const DIGEST_PATTERN = /^sha256:[0-9a-f]{64}$/;
const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const PLAN_STEP_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

/** The packet without the digest-excluded fields. */
function packetContent(packet: EffectPacket): PacketContent {
  const content: Record<string, unknown> = { ...packet };
  for (const field of DIGEST_EXCLUDED_FIELDS) delete content[field];
  return content as PacketContent;
}

const sha256Of = (value: unknown): string => `sha256:${sha256Hex(canonicalJson(value))}`;

/** "sha256:" + hex sha256 of the RFC 8785 canonical packet content (excluded fields removed). */
export function packetDigest(packet: EffectPacket): string {
  return sha256Of(packetContent(packet));
}

/** A copy of the packet with its digest set (any previous digest is replaced). */
export function sealPacket(packet: EffectPacket): SealedPacket {
  return { ...packet, digest: packetDigest(packet) };
}

/**
 * True only when the packet's content hashes to `digest` (default: the packet's own `digest`)
 * and, if the packet carries a digest too, that one agrees. A packet with no digest to check
 * against is not verified.
 */
export function verifyPacketDigest(packet: EffectPacket, digest: string | undefined = packet.digest): boolean {
  if (digest === undefined || !DIGEST_PATTERN.test(digest)) return false;
  if (packet.digest !== undefined && packet.digest !== digest) return false;
  return packetDigest(packet) === digest;
}

/** What the effect does — operation, target, bound parameters — and nothing else. */
function semanticPacketContent(packet: EffectPacket): Record<string, unknown> {
  return {
    kind: 'everdict.effect-semantics',
    packetVersion: packet.packetVersion,
    operation: { connector: packet.operation.connector, name: packet.operation.name },
    target: packet.target,
    params: packet.params,
  };
}

/** The hash mutation identity uses ("sha256:<hex>"); see the module comment for what it covers. */
export function semanticPacketHash(packet: EffectPacket): string {
  return sha256Of(semanticPacketContent(packet));
}

/**
 * The logical key of an effect in RUNTIME_CALLS: case id + stable plan-step id + semantic packet
 * hash. `/` cannot occur in any part, so the key splits back unambiguously.
 *
 * @throws EverdictError `invalid_mutation_key` naming the malformed part.
 */
export function mutationKey(caseId: string, planStepId: string, semanticHash: string): string {
  if (!UUID_PATTERN.test(caseId)) throw invalidKeyPart('caseId', 'must be a lower-case UUID');
  if (!PLAN_STEP_PATTERN.test(planStepId)) throw invalidKeyPart('planStepId', 'must be a plan-step label of at most 64 characters');
  if (!DIGEST_PATTERN.test(semanticHash)) throw invalidKeyPart('semanticHash', 'must be "sha256:" + 64 hex digits');
  return `${caseId}/${planStepId}/${semanticHash}`;
}

/** The mutation key of a packet. */
export function packetMutationKey(packet: EffectPacket): string {
  return mutationKey(packet.caseId, packet.planStepId, semanticPacketHash(packet));
}

function invalidKeyPart(field: string, rule: string): EverdictError {
  return new EverdictError('invalid_mutation_key', `mutation key: ${field} ${rule}`, { details: { path: field } });
}

type PacketValidation =
  | { readonly ok: true; readonly packet: EffectPacket }
  | { readonly ok: false; readonly violations: readonly SchemaViolation[] };

/**
 * Checks a packet against schemas/effect-packet.schema.json, then the invariants the schema
 * cannot express: the target is on the operation's connector, a carried digest matches the
 * content, and every attached verdict is bound to that same digest. Violations name fields,
 * never echo values.
 */
export function validatePacket(value: unknown): PacketValidation {
  const validate = schemaValidator(PACKET_SCHEMA_FILE);
  if (!validate(value)) return { ok: false, violations: schemaViolations(validate.errors) };
  const packet = value as EffectPacket;
  const violations: SchemaViolation[] = [];
  if (packet.target.connector !== packet.operation.connector) {
    violations.push({ path: '/target/connector', message: 'must equal /operation/connector' });
  }
  const digest = packetDigest(packet);
  if (packet.digest !== undefined && packet.digest !== digest) {
    violations.push({ path: '/digest', message: 'does not match the packet content' });
  }
  packet.verdicts?.forEach((v, i) => {
    if (v.digest !== digest) violations.push({ path: `/verdicts/${i}/digest`, message: 'is not the digest of this packet' });
  });
  return violations.length === 0 ? { ok: true, packet } : { ok: false, violations };
}
