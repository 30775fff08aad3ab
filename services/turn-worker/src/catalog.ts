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
import { reportRouteHealth } from '@everdict/store';
import type { Db } from '@everdict/store';
import { mcpConnectorName } from '@everdict/mcp';
import { runtimeSettings, type RuntimeSettings } from './settings.js';
import { builtinTool, traced, type ToolTiming } from './tools.js';
import { declaredMcpTools, McpServers, timedTool } from './mcpTools.js';
import { connectorReadTools, type ReadConnectors } from './connectorReads.js';
import { writesProposeTool } from './writesPropose.js';
import type { ProposalTurn } from './writesPropose.js';
import { versionsOf, type Versions } from './versions.js';
import { meteredModelClient, type TurnMetrics } from './metrics.js';

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
  /** Connector read tools, by the `connector/operation` profiles list. */
  readonly reads: ReadonlyMap<string, Tool>;
  readonly views: Map<string, AgentView>;
}

interface CatalogDeps {
  readonly db: Db;
  readonly timing: (taskId: string) => ToolTiming | undefined;
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Where tool invocations are traced at debug level (tools.ts); default none, no trace. */
  readonly logger?: Logger;
  /** The opened connectors profiles' `reads` call (connectorReads.ts); absent: no connector reads. */
  readonly connectors?: ReadConnectors;
  /** Where the auditors' model calls are counted by route (metrics.ts); absent: not counted. */
  readonly modelCalls?: Pick<TurnMetrics, 'modelCall'>;
}

export class Catalog {
  private gen: Generation;
  /** Running turns that may propose writes, by task id (set by durableTurn for a turn's length). */
  readonly proposals = new Map<string, ProposalTurn>();
  /** The `writes__propose` tool; the same object under every config generation. */
  private readonly propose: Tool;
  /** The MCP servers of this process; a reload keeps the connections of unchanged servers. */
  private readonly mcp: McpServers;
  /** `mcp.connections` when the cached views were built: views over replaced connections are dropped. */
  private viewsConnections = 0;

  constructor(loaded: LoadedFleetConfig, private readonly deps: CatalogDeps) {
    this.mcp = new McpServers(deps.env ?? process.env, (server) => {
      const connector = mcpConnectorName(server);
      reportRouteHealth(deps.db, connector, true).catch((err: unknown) => deps.logger?.warn({ connector, err: String(err) }, 'connector health not recorded'));
    });
    this.propose = this.traced(
      writesProposeTool({
        db: deps.db,
        fleet: () => this.gen.loaded.config,
        auditorOf: (profileName) => this.auditorOf(profileName),
        turnOf: (taskId) => this.proposals.get(taskId),
        auditorTools: (name) => this.auditorTools(name),
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
    const client = this.gen.router.client(profile.route);
    return { name, profile, client: this.deps.modelCalls ? meteredModelClient(client, this.deps.modelCalls) : client };
  }

  /**
   * The read tools an auditor profile declares for checking evidence: its connector reads and
   * its MCP tools declared `read`. A server that cannot be reached offers nothing (the audit
   * goes on without it rather than parking the proposing task).
   */
  async auditorTools(name: string): Promise<Tool[]> {
    const profile = this.profile(name);
    const reads = (profile.reads ?? []).map((entry) => this.gen.reads.get(entry)).filter((t): t is Tool => t !== undefined);
    let mcp: Tool[];
    try {
      await this.connectTools(name);
      mcp = this.mcpTools(profile);
    } catch {
      mcp = [];
    }
    return [...reads, ...mcp].filter((t) => t.descriptor.access === 'read');
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
    this.mcp.configure(c.mcpServers, loaded.baseDir);
    const reads = new Map([...connectorReadTools(c, this.deps.connectors, this.deps)].map(([entry, tool]) => [entry, this.traced(tool)] as const));
    return { loaded, settings: runtimeSettings(c), router, tools, reads, views: new Map() };
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
   * Connects the MCP servers a profile's tools come from (those not connected yet, or whose
   * connection was lost), before its agent is viewed.
   * @throws McpUnavailable (code `connector_down`) naming a server that cannot be reached.
   */
  async connectTools(profileName: string): Promise<void> {
    await this.mcp.connect((this.profile(profileName).mcp ?? []).map((u) => u.server));
  }

  /** Closes the MCP servers' connections (stdio servers exit). */
  async close(): Promise<void> {
    await this.mcp.close();
  }

  /** Which connection of each MCP server of the profile a view is built on (part of its cache key). */
  private mcpConnections(profileName: string): string {
    return (this.gen.loaded.config.profiles[profileName]?.mcp ?? []).map((u) => this.mcp.generationOf(u.server)).join(',');
  }

  /** The profile's declared MCP tools over the servers' live connections; throws McpUnavailable without one. */
  private mcpTools(profile: FleetProfile): Tool[] {
    return (profile.mcp ?? []).flatMap((use) => declaredMcpTools(use, this.mcp.live(use.server).toolset).map((tool) => this.traced(timedTool(tool, this.deps.timing))));
  }

  /**
   * The agent for a task. `declaredTools` null: the profile's tools. A child passes its declared
   * tools, and only those of its profile's tools that are reads its envelope authorises are kept
   * (K4: a child never gains a tool by naming it). MCP tools are offered over their servers' live
   * connections (`connectTools` first): a view is never built on a lost connection.
   * @throws McpUnavailable when a server of the profile has no live connection.
   */
  view(profileName: string, declaredTools: readonly string[] | null, envelope: ExecutionEnvelope): AgentView {
    if (this.viewsConnections !== this.mcp.connections) {
      this.gen.views.clear();
      this.viewsConnections = this.mcp.connections;
    }
    const key = `${profileName}\u0000${declaredTools === null ? '*' : [...declaredTools].sort().join(',')}\u0000${JSON.stringify(envelope.scope)}\u0000${this.mcpConnections(profileName)}`;
    const cached = this.gen.views.get(key);
    if (cached) return cached;
    const profile = this.profile(profileName);
    const base: Tool[] = [];
    // Built-in tools, then connector reads; a reference without a tool adds nothing (the loader
    // and the plan refuse such configs).
    const candidates = [...(profile.tools ?? []).map((name) => this.gen.tools.get(name)), ...(profile.reads ?? []).map((entry) => this.gen.reads.get(entry)), ...this.mcpTools(profile)];
    for (const tool of candidates) {
      if (!tool) continue;
      const name = tool.descriptor.name;
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
