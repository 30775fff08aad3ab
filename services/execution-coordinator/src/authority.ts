/**
 * "Reload current authority" (seed 004 §5): the checks the coordinator makes immediately before
 * dispatch, as ONE pure decision over facts read from the store. It runs twice — before the
 * preflight read and again inside the reservation unit of work with the grant row locked — so
 * nothing that changed in between (a revocation, an expiry, a hard stop) slips through.
 *
 * Order matters only for which reason is reported; every check must pass.
 */
import { verifyPacketDigest } from '@everdict/contracts';
import type { EffectPacket } from '@everdict/contracts';
import type { DecisionRow, GateRow, GrantRow } from '@everdict/store';

export type DispatchRefusalReason =
  | 'grant_missing'
  | 'grant_used'
  | 'grant_expired'
  | 'grant_revoked'
  | 'gate_not_approved'
  | 'digest_mismatch'
  | 'decisions_missing'
  | 'packet_unusable'
  | 'task_missing'
  | 'task_finished'
  | 'task_cancelled'
  | 'hard_stop'
  | 'connector_unknown'
  | 'connector_refused'
  | 'preflight_changed'
  | 'packet_version_unsupported'
  | 'template_unbound'
  | 'template_changed'
  | 'shape_changed';

export interface DispatchRefusal {
  readonly reason: DispatchRefusalReason;
  /** Names what failed; never echoes parameter values. */
  readonly detail: string;
}

export interface AuthorityFacts {
  readonly grant: GrantRow | undefined;
  readonly gate: GateRow | undefined;
  readonly decisions: readonly DecisionRow[];
  /** The gate's pinned packet, or why it could not be read. */
  readonly packet: { readonly ok: true; readonly packet: EffectPacket } | { readonly ok: false; readonly problem: string };
  readonly task: { readonly state: string; readonly cancel_requested: string | null } | undefined;
  readonly caseStop: 'hard' | 'soft' | null;
  /** The journal call this dispatch already reserved the grant for (a new attempt), else null. */
  readonly ownCallId: string | null;
  /** Whether a connector of the packet's name is configured in this process. */
  readonly connectorKnown: boolean;
  /**
   * What the configured connector registers NOW for the packet's write operation: its template
   * hash and the shape version the fleet config declares for it. Undefined when the connector
   * has no such write — its own admission refuses that before contact.
   */
  readonly binding: { readonly templateHash: string; readonly shapeVersion: string } | undefined;
}

/** Packet layouts this coordinator can execute (seed 004 §5 recheck list: the packet's version). */
export const SUPPORTED_PACKET_VERSIONS: readonly number[] = [1];

const TERMINAL = new Set(['done', 'failed']);

export function checkAuthority(f: AuthorityFacts): DispatchRefusal | undefined {
  const { grant, gate } = f;
  if (!grant) return { reason: 'grant_missing', detail: 'no such grant' };
  if (grant.revoked_at !== null || grant.state === 'revoked') return { reason: 'grant_revoked', detail: `the grant was revoked${grant.revoke_reason ? ` (${grant.revoke_reason})` : ''}` };
  if (f.ownCallId === null) {
    if (grant.state === 'reserved' || grant.state === 'consumed') return { reason: 'grant_used', detail: `the grant is already ${grant.state} by another journal call` };
  } else if (grant.state !== 'reserved' || grant.reserved_call_id !== f.ownCallId) {
    return { reason: 'grant_used', detail: `the grant is ${grant.state} and not reserved by this dispatch's call` };
  }
  if (grant.state === 'expired' || grant.expired) return { reason: 'grant_expired', detail: `the grant expired at ${grant.expires_at.toISOString()}` };
  if (!gate || gate.id !== grant.gate_id) return { reason: 'gate_not_approved', detail: 'the grant names no gate' };
  if (gate.state !== 'approved') return { reason: 'gate_not_approved', detail: `the gate is ${gate.state}` };
  if (gate.packet_digest !== grant.packet_digest) return { reason: 'digest_mismatch', detail: 'the grant and its gate name different digests' };
  const missing = gate.required_decisions.filter((r) => !f.decisions.some((d) => d.decision === r.decision && d.verdict === 'approve' && d.digest === grant.packet_digest));
  if (missing.length > 0) return { reason: 'decisions_missing', detail: `no approval bound to the digest for ${missing.map((m) => m.decision).join(', ')}` };
  if (!f.packet.ok) return { reason: 'packet_unusable', detail: f.packet.problem };
  if (!verifyPacketDigest(f.packet.packet, grant.packet_digest)) return { reason: 'digest_mismatch', detail: 'the packet does not hash to the granted digest' };
  if (f.packet.packet.caseId !== grant.case_id) return { reason: 'digest_mismatch', detail: 'the packet belongs to another case than the grant' };
  if (!f.task) return { reason: 'task_missing', detail: 'the proposing task does not exist' };
  if (f.task.state === 'cancelled' || f.task.cancel_requested === 'hard') return { reason: 'task_cancelled', detail: 'the proposing task is cancelled' };
  if (TERMINAL.has(f.task.state)) return { reason: 'task_finished', detail: `the proposing task is ${f.task.state}` };
  if (f.caseStop === 'hard') return { reason: 'hard_stop', detail: 'the case is under hard stop: no new effect starts' };
  if (!f.connectorKnown) return { reason: 'connector_unknown', detail: `no connector ${f.packet.packet.operation.connector} is configured` };
  return checkBinding(f.packet.packet, f.binding);
}

/**
 * Approval binds what runs (§5 Binding): the approved digest covers the packet's template hash,
 * so the operation must still be the reviewed one, in the packet layout and target shape it was
 * approved for. A packet that pins no template hash never ran under review and is refused too.
 */
function checkBinding(packet: EffectPacket, binding: AuthorityFacts['binding']): DispatchRefusal | undefined {
  if (!SUPPORTED_PACKET_VERSIONS.includes(packet.packetVersion)) return { reason: 'packet_version_unsupported', detail: `packetVersion ${packet.packetVersion} is not one this coordinator executes` };
  if (binding === undefined) return undefined;
  const op = `${packet.operation.connector}/${packet.operation.name}`;
  if (packet.operation.templateHash === undefined) return { reason: 'template_unbound', detail: `the packet pins no template hash for ${op}: approval did not bind the request` };
  if (packet.operation.templateHash !== binding.templateHash) return { reason: 'template_changed', detail: `the template of ${op} changed after approval (operation.templateHash)` };
  if (packet.shapeVersion !== binding.shapeVersion) return { reason: 'shape_changed', detail: `${op} is declared for shape version ${binding.shapeVersion}, the packet was approved for another (shapeVersion)` };
  return undefined;
}
