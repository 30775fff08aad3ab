/**
 * Bridges the tools of one MCP server (stdio or streamable HTTP, official SDK) into kernel
 * `Tool`s. Bridged tools validate their arguments on the server side; their declared access
 * and effects come from `classify.ts`, never from the server's self-description alone.
 */
import { createHash } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { EverdictError, TOOL_NAME_PATTERN, type ToolDescriptor } from '@everdict/contracts';
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
  /** Per-call timeout. Default 30 000 ms. */
  readonly callTimeoutMs?: number;
}

export interface McpToolset {
  readonly server: string;
  readonly tools: readonly Tool[];
  close(): Promise<void>;
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

function transportFor(config: McpServerConfig): { transport: Transport; kind: 'stdio' | 'remote' } {
  const t = config.transport;
  if (t.kind === 'stdio') {
    return {
      transport: new StdioClientTransport({ command: t.command, args: [...(t.args ?? [])], env: { ...getDefaultEnvironment(), ...t.env }, cwd: t.cwd, stderr: 'ignore' }),
      kind: 'stdio',
    };
  }
  return { transport: new StreamableHTTPClientTransport(new URL(t.url), { requestInit: { headers: { ...t.headers } } }), kind: 'remote' };
}

export async function connectMcpServer(config: McpServerConfig): Promise<McpToolset> {
  if (!TOOL_NAME_PATTERN.test(config.name) || config.name.length > 32) {
    throw new EverdictError('invalid_mcp_server', `mcp server name ${JSON.stringify(config.name)} must be 1–32 of [A-Za-z0-9_-]`, { details: { field: 'name' } });
  }
  const { transport, kind } = transportFor(config);
  const client = new Client({ name: 'everdict', version: '0.1.0' }, { capabilities: {} });
  try {
    await client.connect(transport);
  } catch (err) {
    await transport.close().catch(() => undefined);
    throw new EverdictError('mcp_connect_failed', `mcp server ${config.name} did not connect`, { cause: err, details: { server: config.name }, retryable: true });
  }
  const listed: { name: string; description?: string; title?: string; inputSchema: Record<string, unknown>; annotations?: McpAnnotations }[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor });
    listed.push(...(page.tools as typeof listed));
    cursor = page.nextCursor;
  } while (cursor !== undefined);

  const timeout = config.callTimeoutMs ?? 30_000;
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
        try {
          const result = await client.callTool({ name: t.name, arguments: { ...args } }, undefined, { timeout });
          return { content: renderMcpContent(result.content as ContentItem[] | undefined, result.structuredContent), isError: result.isError === true };
        } catch (err) {
          // Protocol errors (unknown tool, invalid params, timeout) are the tool failing, not the run.
          return { content: `MCP ${config.name}/${t.name} failed: ${err instanceof Error ? err.message : String(err)}`, isError: true };
        }
      },
    };
  });
  return {
    server: config.name,
    tools,
    close: () => client.close(),
  };
}
