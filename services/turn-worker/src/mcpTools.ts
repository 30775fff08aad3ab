/**
 * MCP tool servers (the fleet config's `mcpServers`) and the tools a profile offers from them
 * (`profiles.X.mcp`), for one turn-worker process.
 *
 * Invariants:
 * - Only the tools the profile declares are offered, each with the access the operator declared
 *   for it (K3): a server's own annotations are self-claims and never decide a gate. A read of an
 *   http server with no declared effects is `{dataAccess: {egress: "external"}}` — the transport
 *   being an external endpoint is a structural fact — so it needs consent; a stdio server's read
 *   synthesises nothing. libs/mcp `classify.ts` decides both; this module only feeds it.
 * - A server is connected lazily, by the first activation whose profile uses it, and its tool
 *   list is fetched once per connection. The descriptors the model is shown come from that list,
 *   so the tool schema hash recorded with every journal row and checkpoint (versions.ts) covers
 *   them: a server that comes back with other tools is a `tools` version change.
 * - A connection the server lost (its process exited, the connection dropped, a call timed out)
 *   is replaced by the next activation that needs the server. A reload keeps the connection of a
 *   server whose config is unchanged and closes the others.
 * - A stdio server runs in the config file's folder with a scrubbed environment: the SDK's
 *   minimal defaults (PATH, HOME, USER, SHELL, TERM, LOGNAME) plus the variables its `env` maps,
 *   each read from this process's variable it names. An http server's Authorization header is
 *   the value of the variable `authHeaderEnv` names. Values are never logged or echoed.
 * - A server that cannot be reached throws `McpUnavailable` (code `connector_down`): the task
 *   parks `connector_down` with backoff, never fails. A new connection is the health signal:
 *   the tasks parked on the server wake without waiting out their timers.
 */
import { canonicalJson } from '@everdict/contracts';
import type { FleetConfig, FleetMcpServer, FleetMcpUse, ToolDescriptor } from '@everdict/contracts';
import type { Tool } from '@everdict/agent-runtime';
import { bridgedAccess, bridgedEffectsFor, bridgedToolName, connectMcpServer, McpUnavailable } from '@everdict/mcp';
import type { McpToolset, McpTransportConfig, ToolDeclaration } from '@everdict/mcp';
import type { ToolTiming } from './tools.js';

type Env = Readonly<Record<string, string | undefined>>;

/** Default connection and call timeout of a server (`timeoutMs`). */
const DEFAULT_TIMEOUT_MS = 30_000;

/** How the bridge reaches a server; a variable it names that is not set makes it unreachable. */
function transportOf(name: string, spec: FleetMcpServer, baseDir: string, env: Env): McpTransportConfig {
  const variable = (from: string, field: string): string => {
    const value = env[from];
    if (value === undefined) throw new McpUnavailable(name, `mcpServers.${name}.${field} names ${from}, which is not set`);
    return value;
  };
  if (spec.transport === 'stdio') {
    const vars: Record<string, string> = {};
    for (const [key, from] of Object.entries(spec.env ?? {})) if (from !== undefined) vars[key] = variable(from, `env.${key}`);
    return { kind: 'stdio', command: spec.command, args: spec.args ?? [], env: vars, cwd: baseDir };
  }
  return { kind: 'http', url: spec.url, ...(spec.authHeaderEnv === undefined ? {} : { headers: { Authorization: variable(spec.authHeaderEnv, 'authHeaderEnv') } }) };
}

/**
 * The tools `use` declares, from the server's bridged tools, each described by the operator's
 * declaration. A declared tool the server does not list is not offered.
 */
export function declaredMcpTools(use: FleetMcpUse, toolset: Pick<McpToolset, 'tools'>): Tool[] {
  const byName = new Map(toolset.tools.map((t) => [t.descriptor.name, t]));
  const out: Tool[] = [];
  for (const [toolName, d] of Object.entries(use.tools)) {
    const bridged = byName.get(bridgedToolName(use.server, toolName));
    if (bridged === undefined || d === undefined) continue;
    const declaration: ToolDeclaration = { access: d.access, ...(d.effects === undefined ? {} : { effects: d.effects }) };
    // Every server of the fleet config is a workspace server: only the declaration speaks for it.
    const { access } = bridgedAccess('workspace', toolName, undefined, declaration);
    const effects = bridgedEffectsFor('workspace', bridged.descriptor.transport === 'remote' ? 'remote' : 'stdio', access, declaration);
    const { effects: _claimed, independent: _i, ...rest } = bridged.descriptor;
    const descriptor: ToolDescriptor = { ...rest, access, ...(effects === undefined ? {} : { effects }), ...(d.independent === true ? { independent: true } : {}) };
    out.push({ descriptor, invoke: (args, ctx) => bridged.invoke(args, ctx) });
  }
  return out;
}

/** `tool` with the time its calls take reported to the running turn (not the runtime's overhead). */
export function timedTool(tool: Tool, timing: (taskId: string) => ToolTiming | undefined): Tool {
  return {
    descriptor: tool.descriptor,
    async invoke(args, ctx) {
      const started = performance.now();
      try {
        return await tool.invoke(args, ctx);
      } finally {
        timing(ctx.taskId)?.addToolMs(performance.now() - started);
      }
    },
  };
}

interface Slot {
  /** Canonical JSON of the server's config and folder: a reload that changes it reconnects. */
  readonly key: string;
  readonly spec: FleetMcpServer;
  toolset: McpToolset | null;
  connecting: Promise<McpToolset> | null;
  /** Counts this slot's connections; a view built on an older one is stale. */
  generation: number;
}

/** The MCP servers of this process, connected on demand. */
export class McpServers {
  private slots = new Map<string, Slot>();
  private baseDir = '.';
  private closed = false;
  /** Connections made by this process so far: what was built on the earlier ones may be dropped. */
  connections = 0;

  /** `onConnected` hears of every new connection (the health signal parked tasks wake on). */
  constructor(
    private readonly env: Env,
    private readonly onConnected: (server: string) => void = () => undefined,
  ) {}

  /** Takes the fleet config's servers: unchanged ones keep their connection, the others close. */
  configure(servers: FleetConfig['mcpServers'], baseDir: string): void {
    this.baseDir = baseDir;
    const next = new Map<string, Slot>();
    for (const [name, spec] of Object.entries(servers ?? {})) {
      if (spec === undefined) continue;
      const key = canonicalJson({ spec, baseDir });
      const kept = this.slots.get(name);
      next.set(name, kept !== undefined && kept.key === key ? kept : { key, spec, toolset: null, connecting: null, generation: 0 });
    }
    for (const [name, slot] of this.slots) if (next.get(name) !== slot) void slot.toolset?.close().catch(() => undefined);
    this.slots = next;
  }

  /** Connects every server of `names` that has no live connection; throws McpUnavailable for one that cannot be. */
  async connect(names: readonly string[]): Promise<void> {
    const pending = names.map((name) => this.connectOne(name));
    const ended = await Promise.allSettled(pending);
    const failed = ended.find((e) => e.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
  }

  private connectOne(name: string): Promise<McpToolset> {
    const slot = this.slots.get(name);
    if (slot === undefined || this.closed) return Promise.reject(new McpUnavailable(name, 'not configured'));
    if (slot.toolset?.connected) return Promise.resolve(slot.toolset);
    // One attempt at a time per server: the activations that need it share its outcome.
    slot.connecting ??= (async () => {
      try {
        const transport = transportOf(name, slot.spec, this.baseDir, this.env);
        const toolset = await connectMcpServer({ name, trust: 'workspace', transport, callTimeoutMs: slot.spec.timeoutMs ?? DEFAULT_TIMEOUT_MS });
        if (this.slots.get(name) !== slot || this.closed) {
          await toolset.close().catch(() => undefined);
          throw new McpUnavailable(name, 'reconfigured while connecting');
        }
        slot.toolset = toolset;
        slot.generation++;
        this.connections++;
        this.onConnected(name);
        return toolset;
      } finally {
        slot.connecting = null;
      }
    })();
    return slot.connecting;
  }

  /** The live connection of `name` and its generation. Throws McpUnavailable when there is none. */
  live(name: string): { toolset: McpToolset; generation: number } {
    const slot = this.slots.get(name);
    if (slot?.toolset?.connected !== true) throw new McpUnavailable(name, 'not connected');
    return { toolset: slot.toolset, generation: slot.generation };
  }

  /** Which connection of `name` a view would be built on (0: none live). */
  generationOf(name: string): number {
    const slot = this.slots.get(name);
    return slot?.toolset?.connected === true ? slot.generation : 0;
  }

  /** Closes every connection (stdio servers exit); nothing connects afterwards. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.slots.values()].map((s) => s.toolset?.close()));
  }
}
