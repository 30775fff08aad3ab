/**
 * ExecutionMode (K7): "this run performs no effects" is decided at the INVOCATION point, never
 * by a permission hook answering deny. A hook is consulted only for writes and consent reads,
 * so it cannot bound a run whose read-only flags come from a third party. Shadow mode binds
 * sub-agents exactly like the envelope does. Absent mode is live.
 */
import { isIntrinsic, type ToolDescriptor } from './tools.js';

export type ExecutionMode =
  | { readonly kind: 'live' }
  /** `executableReads`: tool names the HOST attests as its own first-party reads. */
  | { readonly kind: 'shadow'; readonly executableReads: readonly string[] };

/**
 * Whether the call may be invoked under the mode. In shadow mode only intrinsic cognition and
 * host-attested first-party reads run. The origin and access checks make the attestation list
 * unable to admit a workspace tool or a write even if a host lists one by mistake.
 */
export function modeAdmitsInvocation(
  tool: Pick<ToolDescriptor, 'name' | 'access' | 'origin' | 'intrinsic'>,
  mode: ExecutionMode | undefined,
): boolean {
  if (mode === undefined || mode.kind === 'live') return true;
  if (isIntrinsic(tool)) return true;
  return tool.origin === 'first_party' && tool.access === 'read' && mode.executableReads.includes(tool.name);
}
