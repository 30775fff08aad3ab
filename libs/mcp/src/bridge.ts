/**
 * Bridges the tools of one MCP server (stdio or streamable HTTP, official SDK) into kernel
 * `Tool`s. Bridged tools validate their arguments on the server side; their declared access
 * and effects come from `classify.ts`, never from the server's self-description alone.
 *
 * A server that cannot answer — it does not start or connect, its process exits, the connection
 * drops, a request times out — is not a tool failing: connecting throws, and a call throws,
 * `McpUnavailable` (code `connector_down`, the kernel's TOOL_UNAVAILABLE), and the toolset is
 * no longer `connected` (a holder connects afresh). A protocol error the server answers with
 * (unknown tool, invalid arguments) and a result marked `isError` are the tool's own answer.
 *
 * The SDK is loaded by the first connection, not by importing this module: a process that
 * connects to no MCP server never carries it.
 */
import { createHash } from 'node:crypto';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { EverdictError, TOOL_NAME_PATTERN, TOOL_UNAVAILABLE, type ToolDescriptor } from '@everdict/contracts';
import type { Tool, ToolOutput } from '@everdict/agent-runtime';
import { bridgedAccess, bridgedEffectsFor, type McpAnnotations, type ServerTrust, type ToolDeclaration } from './classify.js';

export type McpTransportConfig =
  | { readonly kind: 'stdio'; readonly command: string; readonly args?: readonly string[]; readonly env?: Readonly<Record<string, string>>; readonly cwd?: string }
  | { readonly kind: 'http'; readonly url: string; readonly headers?: Readonly<Record<string, string>> };

export interface McpServerConfig {
  /** Prefix of the bridged tool names (`<name>__<tool>`); letters, digits, `_` and `-`. */
  readonly name: string;
  readonly transport: McpTransportConfig;
  /** `first_party`: the control plane's own server. Everything else is `workspace`. */
  readonly trust: ServerTrust;
  /** The host author's declarations, by the server's own tool name. Always win. */
  readonly declarations?: Readonly<Record<string, ToolDeclaration>>;
  /** Timeout of the connection (initialize, tool list) and of each call. Default 30 000 ms. */
  readonly callTimeoutMs?: number;
}

export interface McpToolset {
  readonly server: string;
  readonly tools: readonly Tool[];
  /** False once the server was seen unavailable or the connection closed: its tools only throw. */
  readonly connected: boolean;
  close(): Promise<void>;
}

/** The connector name an MCP server's unavailability is reported under (park detail). */
export const mcpConnectorName = (server: string) => `mcp:${server}`;

/** The server did not answer (start, connection, crash, timeout); retrying later may help. */
export class McpUnavailable extends EverdictError {
  constructor(server: string, what: string, cause?: unknown) {
    super(TOOL_UNAVAILABLE, `mcp server ${server} is unavailable (${what})`, { retryable: true, cause, details: { connector: mcpConnectorName(server), server } });
  }
}

type Sdk = Awaited<ReturnType<typeof loadSdk>>;

async function loadSdk() {
  const [client, stdio, http, types] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/stdio.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]);
  return {
    Client: client.Client,
    StdioClientTransport: stdio.StdioClientTransport,
    getDefaultEnvironment: stdio.getDefaultEnvironment,
    StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
    McpError: types.McpError,
    ErrorCode: types.ErrorCode,
  };
}

/** Why a request failed, as the park detail and logs may say it (never an endpoint or a value). */
function reason(sdk: Sdk, err: unknown): string {
  if (err instanceof sdk.McpError && err.code === sdk.ErrorCode.RequestTimeout) return 'timed out';
  if (err instanceof sdk.McpError && err.code === sdk.ErrorCode.ConnectionClosed) return 'connection closed';
  const code = (err as { cause?: { code?: unknown } } | null)?.cause?.code;
  return typeof code === 'string' ? code : err instanceof Error ? err.name : 'error';
}

/**
 * Whether a failed request means the server did not answer. What the server itself answered
 * with (an MCP error other than a closed connection or a timeout) and a response the client
 * could not parse are the tool's failure, not the server's absence.
 */
function serverUnavailable(sdk: Sdk, err: unknown): boolean {
  if (err instanceof sdk.McpError) return err.code === sdk.ErrorCode.ConnectionClosed || err.code === sdk.ErrorCode.RequestTimeout;
  return !(err instanceof Error && err.name === 'ZodError');
}

/** `<server>__<tool>`, reduced to the providers' name alphabet; long names keep a hash suffix. */
export function bridgedToolName(server: string, tool: string): string {
  const raw = `${server}__${tool}`.replace(/[^A-Za-z0-9_-]/g, '_');
  if (raw.length <= 64) return raw;
  const suffix = createHash('sha256').update(`${server}\u0000${tool}`).digest('hex').slice(0, 8);
  return `${raw.slice(0, 55)}_${suffix}`;
}

type ContentItem = { type: string; text?: string; mimeType?: string; data?: string; uri?: string; resource?: { uri?: string; text?: string } };

/** Renders MCP content for the model: text as is, binary as a short marker. */
export function renderMcpContent(content: readonly ContentItem[] | undefined, structured: unknown): string {
  const parts = (content ?? []).map((c) => {
    switch (c.type) {
      case 'text':
        return c.text ?? '';
      case 'image':
      case 'audio':
        return `[${c.type} ${c.mimeType ?? 'unknown type'}, ${c.data?.length ?? 0} base64 chars]`;
      case 'resource':
        return c.resource?.text ?? `[resource ${c.resource?.uri ?? ''}]`;
      case 'resource_link':
        return `[resource link ${c.uri ?? ''}]`;
      default:
        return `[${c.type} content]`;
    }
  });
  if (parts.length === 0 && structured !== undefined) return JSON.stringify(structured);
  return parts.join('\n');
}

function transportFor(sdk: Sdk, config: McpServerConfig): { transport: Transport; kind: 'stdio' | 'remote' } {
  const t = config.transport;
  if (t.kind === 'stdio') {
    return {
      transport: new sdk.StdioClientTransport({ command: t.command, args: [...(t.args ?? [])], env: { ...sdk.getDefaultEnvironment(), ...t.env }, cwd: t.cwd, stderr: 'ignore' }),
      kind: 'stdio',
    };
  }
  return { transport: new sdk.StreamableHTTPClientTransport(new URL(t.url), { requestInit: { headers: { ...t.headers } } }), kind: 'remote' };
}

export async function connectMcpServer(config: McpServerConfig): Promise<McpToolset> {
  if (!TOOL_NAME_PATTERN.test(config.name) || config.name.length > 32) {
    throw new EverdictError('invalid_mcp_server', `mcp server name ${JSON.stringify(config.name)} must be 1–32 of [A-Za-z0-9_-]`, { details: { field: 'name' } });
  }
  const sdk = await loadSdk();
  const { transport, kind } = transportFor(sdk, config);
  const client = new sdk.Client({ name: 'everdict', version: '0.1.0' }, { capabilities: {} });
  const timeout = config.callTimeoutMs ?? 30_000;
  let connected = true;
  const listed: { name: string; description?: string; title?: string; inputSchema: Record<string, unknown>; annotations?: McpAnnotations }[] = [];
  try {
    await client.connect(transport, { timeout });
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout });
      listed.push(...(page.tools as typeof listed));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  } catch (err) {
    await client.close().catch(() => undefined);
    await transport.close().catch(() => undefined);
    throw new McpUnavailable(config.name, `did not connect: ${reason(sdk, err)}`, err);
  }
  // A stdio server that exits, or a transport that closes, ends this connection for good.
  client.onclose = () => {
    connected = false;
  };
  /** The server did not answer: the connection is dropped (a hung stdio server is stopped). */
  const lost = (err: unknown): McpUnavailable => {
    connected = false;
    void client.close().catch(() => undefined);
    return new McpUnavailable(config.name, reason(sdk, err), err);
  };

  const tools: Tool[] = listed.map((t) => {
    const declaration = config.declarations?.[t.name];
    const { access } = bridgedAccess(config.trust, t.name, t.annotations, declaration);
    const effects = bridgedEffectsFor(config.trust, kind, access, declaration);
    const descriptor: ToolDescriptor = {
      name: bridgedToolName(config.name, t.name),
      description: t.description ?? t.title ?? t.name,
      inputSchema: t.inputSchema,
      access,
      ...(effects === undefined ? {} : { effects }),
      origin: config.trust === 'first_party' ? 'first_party' : 'workspace',
      transport: kind,
      argumentValidation: 'server',
      ...(declaration?.independent === true ? { independent: true } : {}),
    };
    return {
      descriptor,
      async invoke(args): Promise<ToolOutput> {
        if (!connected) throw new McpUnavailable(config.name, 'connection closed');
        try {
          const result = await client.callTool({ name: t.name, arguments: { ...args } }, undefined, { timeout });
          return { content: renderMcpContent(result.content as ContentItem[] | undefined, result.structuredContent), isError: result.isError === true };
        } catch (err) {
          if (serverUnavailable(sdk, err)) throw lost(err);
          // What the server answered (unknown tool, invalid params) is the tool failing, not the run.
          return { content: `MCP ${config.name}/${t.name} failed: ${err instanceof Error ? err.message : String(err)}`, isError: true };
        }
      },
    };
  });
  return {
    server: config.name,
    tools,
    get connected() {
      return connected;
    },
    close: async () => {
      connected = false;
      await client.close();
    },
  };
}
