/**
 * The independent review of a write packet (DESIGN §6, seed 004 §5): a separate auditor profile,
 * on its own route, is shown the packet and the evidence the proposal cites — never the author's
 * transcript, profile or task — and answers approve or reject with a reason. The auditor is not
 * the writer: a profile may not audit its own proposals (refused here and by the config check).
 *
 * Fail closed: an answer that is not exactly one verdict object is a rejection, with a reason
 * that says so. A model error is not a verdict: the caller reports the audit as unavailable and
 * no packet goes to the gate.
 */
import { canonicalJson } from '@everdict/contracts';
import type { EffectPacket, FleetProfile } from '@everdict/contracts';
import type { ModelClient, ModelRequest } from '@everdict/llm';

export interface AuditVerdict {
  readonly verdict: 'approve' | 'reject';
  readonly reason: string;
  /** The auditor profile, as "<name>@<version>". */
  readonly by: string;
}

const INSTRUCTIONS =
  'You are an independent auditor of one proposed write. You see the exact packet that would be executed and the evidence ' +
  'its author cites; you do not see the author. Check that the packet does what its summary says, that its parameters, ' +
  'expected counts, assertions and revert are consistent, and that the evidence supports it. Answer with exactly one JSON ' +
  'object and nothing else: {"verdict": "approve" | "reject", "reason": "<one or two sentences>"}.';

/** The auditor's request: its own prompt, the packet and the evidence; no tools, no transcript. */
function auditRequest(auditor: Pick<FleetProfile, 'prompt' | 'maxOutputTokens'>, packet: EffectPacket, evidence: readonly string[]): ModelRequest {
  const subject = { packet: { ...packet, verdicts: undefined, grantIds: undefined }, evidence };
  return {
    system: `${auditor.prompt}\n\n${INSTRUCTIONS}`,
    messages: [{ role: 'user', content: canonicalJson(JSON.parse(JSON.stringify(subject)) as unknown) }],
    tools: [],
    ...(auditor.maxOutputTokens ? { maxOutputTokens: auditor.maxOutputTokens } : {}),
  };
}

/** Reads the auditor's answer; anything but one verdict object rejects (fail closed). */
export function parseVerdict(text: string | null, by: string): AuditVerdict {
  const reject = (reason: string): AuditVerdict => ({ verdict: 'reject', reason, by });
  if (text === null) return reject('the auditor gave no answer');
  const start = text.indexOf('{');
  const end = text.lastIndexOf('}');
  if (start < 0 || end < start) return reject('the auditor answer is not a verdict object');
  let doc: unknown;
  try {
    doc = JSON.parse(text.slice(start, end + 1));
  } catch {
    return reject('the auditor answer is not valid JSON');
  }
  const v = (doc as { verdict?: unknown }).verdict;
  const reason = (doc as { reason?: unknown }).reason;
  if (v !== 'approve' && v !== 'reject') return reject('the auditor answer names no verdict');
  return { verdict: v, reason: typeof reason === 'string' && reason.length > 0 ? reason.slice(0, 2000) : v === 'approve' ? 'approved' : 'rejected', by };
}

/** Asks the auditor. Throws the model's error (the audit is then unavailable, not a verdict). */
export async function auditPacket(
  client: ModelClient,
  auditor: { readonly name: string; readonly profile: FleetProfile },
  packet: EffectPacket,
  evidence: readonly string[],
  signal?: AbortSignal,
): Promise<AuditVerdict> {
  const reply = await client.complete(auditRequest(auditor.profile, packet, evidence), signal ? { signal } : {});
  return parseVerdict(reply.output.text, `${auditor.name}@${auditor.profile.version}`);
}
