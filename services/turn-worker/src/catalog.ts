/**
 * The catalog: what the fleet config says an agent is — its profile, the route its model calls
 * go through, the tools it sees — resolved into kernel objects, plus the versions they amount
 * to. `replace` swaps the whole config (SIGHUP): the next model call of every task goes through
 * the new route; nothing already journalled or checkpointed changes, and no task row is touched.
 */
import { authorizeToolInvocation, EverdictError } from '@everdict/contracts';
import type { ExecutionEnvelope, ExecutionMode, FleetCaseType, FleetProfile } from '@everdict/contracts';
import { kernelRegistry } from '@everdict/agent-runtime';
import type { Tool, ToolRegistry } from '@everdict/agent-runtime';
import { ModelRouter } from '@everdict/llm';
import type { ModelClient, RouteTable } from '@everdict/llm';
import type { LoadedFleetConfig, Logger } from '@everdict/service-kit';
import type { Db } from '@everdict/store';
import { runtimeSettings, type RuntimeSettings } from './settings.js';
import { builtinTool, traced, type ToolTiming } from './tools.js';
import { writesProposeTool } from './writesPropose.js';
import type { ProposalTurn } from './writesPropose.js';
import { versionsOf, type Versions } from './versions.js';

/** An agent as it runs now: prompt, model client, registry and the versions they amount to. */
export interface AgentView {
  readonly profileName: string;
  readonly profile: FleetProfile;
  readonly model: ModelClient;
  readonly registry: ToolRegistry;
  readonly versions: Versions;
}

interface Generation {
  readonly loaded: LoadedFleetConfig;
  readonly settings: RuntimeSettings;
  readonly router: ModelRouter;
  readonly tools: ReadonlyMap<string, Tool>;
  readonly views: Map<string, AgentView>;
}

interface CatalogDeps {
  readonly db: Db;
  readonly timing: (taskId: string) => ToolTiming | undefined;
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Where tool invocations are traced at debug level (tools.ts); default none, no trace. */
  readonly logger?: Logger;
}

export class Catalog {
  private gen: Generation;
  /** Running turns that may propose writes, by task id (set by durableTurn for a turn's length). */
  readonly proposals = new Map<string, ProposalTurn>();
  /** The `writes__propose` tool; the same object under every config generation. */
  private readonly propose: Tool;

  constructor(loaded: LoadedFleetConfig, private readonly deps: CatalogDeps) {
    this.propose = this.traced(
      writesProposeTool({
        db: deps.db,
        fleet: () => this.gen.loaded.config,
        auditorOf: (profileName) => this.auditorOf(profileName),
        turnOf: (taskId) => this.proposals.get(taskId),
      }),
    );
    this.gen = this.build(loaded);
  }

  /**
   * The auditor of a profile's write proposals: a DIFFERENT profile, on its own route (the
   * auditor is not the writer). A profile without one cannot have proposals approved.
   */
  auditorOf(profileName: string): { name: string; profile: FleetProfile; client: ModelClient } | { missing: string } {
    const name = this.profile(profileName).auditor;
    if (name === undefined) return { missing: `profile ${profileName} has no auditor profile configured (profiles.${profileName}.auditor)` };
    if (name === profileName) return { missing: `profile ${profileName} names itself as its auditor; the auditor is not the writer` };
    const profile = this.gen.loaded.config.profiles[name];
    if (!profile) return { missing: `auditor profile ${name} is not in the fleet config` };
    return { name, profile, client: this.gen.router.client(profile.route) };
  }

  /** Every running turn has its entry in `proposals`, which names the task's case. */
  private traced(tool: Tool): Tool {
    return this.deps.logger ? traced(tool, this.deps.logger, (taskId) => this.proposals.get(taskId)?.caseId) : tool;
  }

  private build(loaded: LoadedFleetConfig): Generation {
    const c = loaded.config;
    const routes: RouteTable = Object.fromEntries(Object.entries(c.routes).filter((e): e is [string, NonNullable<(typeof e)[1]>] => e[1] !== undefined));
    const router = new ModelRouter(routes, { baseDir: loaded.baseDir, ...(this.deps.env ? { env: this.deps.env } : {}) });
    const tools = new Map<string, Tool>();
    for (const [name, spec] of Object.entries(c.tools ?? {})) if (spec) tools.set(name, this.traced(builtinTool(name, spec, this.deps)));
    return { loaded, settings: runtimeSettings(c), router, tools, views: new Map() };
  }

  get loaded(): LoadedFleetConfig {
    return this.gen.loaded;
  }

  get settings(): RuntimeSettings {
    return this.gen.settings;
  }

  /** Swaps the config; views are rebuilt lazily under the new one. */
  replace(loaded: LoadedFleetConfig): void {
    this.gen = this.build(loaded);
  }

  profile(name: string): FleetProfile {
    const p = this.gen.loaded.config.profiles[name];
    if (!p) throw new EverdictError('unknown_profile', `profile ${name} is not in the fleet config`, { details: { field: `profiles.${name}` } });
    return p;
  }

  caseType(name: string): FleetCaseType {
    const ct = this.gen.loaded.config.caseTypes[name];
    if (!ct) throw new EverdictError('unknown_case_type', `case type ${name} is not in the fleet config`, { details: { field: `caseTypes.${name}` } });
    return ct;
  }

  /** The envelope and mode a root task of `caseType` runs under. */
  rootContext(caseTypeName: string): { envelope: ExecutionEnvelope; mode: ExecutionMode | null; profile: string } {
    const ct = this.caseType(caseTypeName);
    const profile = this.profile(ct.rootProfile);
    return {
      envelope: { scope: { reads: ct.scope.reads, writes: ct.scope.writes, forbidden: ct.scope.forbidden }, budget: ct.budget ?? profile.budget ?? {} },
      mode: ct.shadow ? { kind: 'shadow', executableReads: ct.shadow } : null,
      profile: ct.rootProfile,
    };
  }

  /** The profile a task of `profileName` gives its sub-agents. */
  childProfileOf(profileName: string): string {
    return this.profile(profileName).childProfile ?? profileName;
  }

  /**
   * The agent for a task. `declaredTools` null: the profile's tools. A child passes its declared
   * tools, and only those of its profile's tools that are reads its envelope authorises are kept
   * (K4: a child never gains a tool by naming it).
   */
  view(profileName: string, declaredTools: readonly string[] | null, envelope: ExecutionEnvelope): AgentView {
    const key = `${profileName}\u0000${declaredTools === null ? '*' : [...declaredTools].sort().join(',')}\u0000${JSON.stringify(envelope.scope)}`;
    const cached = this.gen.views.get(key);
    if (cached) return cached;
    const profile = this.profile(profileName);
    const base: Tool[] = [];
    for (const name of profile.tools ?? []) {
      const tool = this.gen.tools.get(name);
      if (!tool) continue; // the loader refuses such configs; a stale reference adds nothing
      if (declaredTools !== null && (!declaredTools.includes(name) || tool.descriptor.access !== 'read' || !authorizeToolInvocation(tool.descriptor, envelope).allowed)) continue;
      base.push(tool);
    }
    // A root agent whose case scope admits proposals (`writes__propose` in scope.writes) gets the
    // tool; children never do (K4: a child's registry is its parent's read-only tools).
    if (declaredTools === null && authorizeToolInvocation(this.propose.descriptor, envelope).allowed) base.push(this.propose);
    const registry = kernelRegistry(base);
    const model = this.gen.router.client(profile.route);
    const view: AgentView = {
      profileName,
      profile,
      model,
      registry,
      versions: versionsOf({ profile: profileName, profileVersion: profile.version, prompt: profile.prompt, route: model.route, tools: registry.descriptors }),
    };
    this.gen.views.set(key, view);
    return view;
  }
}
