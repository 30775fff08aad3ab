/**
 * Sub-agents shrink, never escape (K4). A child's registry is the parent's read-only base tools
 * that the parent's own scope admits (∩ what the spawn asked for); intrinsic cognition is merged
 * afresh for the child. The parent's envelope and mode bind the child verbatim; the child's
 * budget usage counts from zero.
 */
import { authorizeToolInvocation, type ExecutionEnvelope } from '@everdict/contracts';
import { kernelRegistry, type Tool, type ToolRegistry } from './registry.js';

/** Parent base tools a child may have: declared reads the parent's envelope authorises. */
function delegableTools(parent: ToolRegistry, envelope: ExecutionEnvelope): Tool[] {
  return parent.baseTools.filter((t) => t.descriptor.access === 'read' && authorizeToolInvocation(t.descriptor, envelope).allowed);
}

/** Names for the child: delegable ∩ requested (all delegable when nothing was requested). */
export function childToolNames(parent: ToolRegistry, envelope: ExecutionEnvelope, requested?: readonly string[]): string[] {
  const names = delegableTools(parent, envelope).map((t) => t.descriptor.name);
  return requested === undefined ? names : names.filter((n) => requested.includes(n));
}

/**
 * The child's registry. Recomputed from the parent registry rather than trusting `toolNames`,
 * so a name that is not delegable can never enter a child by being listed.
 */
export function childRegistry(parent: ToolRegistry, envelope: ExecutionEnvelope, toolNames: readonly string[]): ToolRegistry {
  return kernelRegistry(delegableTools(parent, envelope).filter((t) => toolNames.includes(t.descriptor.name)));
}
