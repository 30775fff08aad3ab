/**
 * Versions (seed 004 §8): every journal row and checkpoint names the profile, prompt, route and
 * runtime it was produced under and the hash of the tool schemas the model saw. A task resumed
 * under different versions continues only under a RECORDED decision — by policy (e.g. a route
 * swap continues) or by an operator — never silently. Pure functions; no I/O.
 */
import { payloadHash } from '@everdict/contracts';
import type { RuntimeStateVersions } from '@everdict/contracts';
import type { RouteIdentity } from '@everdict/llm';
import type { ToolDescriptor } from '@everdict/contracts';

/** This runtime's version, recorded with every call and checkpoint. */
const RUNTIME_VERSION = '0.1.0';

export type Versions = RuntimeStateVersions;

export type VersionField = 'profile' | 'prompt' | 'route' | 'runtime' | 'tools';
export type VersionDecision = 'continue' | 'park';
export type VersionPolicy = Readonly<Record<VersionField, VersionDecision>>;

/** Route and runtime swaps are operational and continue; a changed agent waits for an operator. */
export const DEFAULT_VERSION_POLICY: VersionPolicy = Object.freeze({ profile: 'park', prompt: 'park', route: 'continue', runtime: 'continue', tools: 'park' });

/** The hash of the tool schemas exactly as the model is shown them. */
function toolSchemaHash(descriptors: readonly Pick<ToolDescriptor, 'name' | 'description' | 'inputSchema'>[]): string {
  return payloadHash(descriptors.map((d) => ({ name: d.name, description: d.description, inputSchema: d.inputSchema })));
}

export function versionsOf(p: { profile: string; profileVersion: string; prompt: string; route: RouteIdentity; tools: readonly Pick<ToolDescriptor, 'name' | 'description' | 'inputSchema'>[] }): Versions {
  return {
    profile: p.profile,
    profileVersion: p.profileVersion,
    promptHash: payloadHash(p.prompt),
    route: p.route.name,
    routeConfigHash: p.route.configHash,
    runtime: RUNTIME_VERSION,
    toolSchemaHash: toolSchemaHash(p.tools),
  };
}

export function versionsHash(v: Versions): string {
  return payloadHash(v);
}

/** Which version fields differ between what a state was produced under and what runs now. */
export function changedVersions(from: Versions, to: Versions): VersionField[] {
  const changed: VersionField[] = [];
  if (from.profile !== to.profile || from.profileVersion !== to.profileVersion) changed.push('profile');
  if (from.promptHash !== to.promptHash) changed.push('prompt');
  if (from.route !== to.route || from.routeConfigHash !== to.routeConfigHash) changed.push('route');
  if (from.runtime !== to.runtime) changed.push('runtime');
  if (from.toolSchemaHash !== to.toolSchemaHash) changed.push('tools');
  return changed;
}

/** The policy's answer for a set of changes: any field that parks, parks. */
export function decideVersions(policy: VersionPolicy, changed: readonly VersionField[]): VersionDecision {
  return changed.some((f) => policy[f] === 'park') ? 'park' : 'continue';
}
