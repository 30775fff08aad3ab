/** The bridge against an in-test streamable-HTTP MCP server (official SDK) on 127.0.0.1. */
import { randomUUID } from 'node:crypto';
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectMcpServer, type McpServerConfig, type McpToolset } from '@everdict/mcp';
import { answer, harnessFor } from './kernel-harness.js';

const invoked: string[] = [];
let http: HttpServer;
let url: string;

interface TestTool {
  readonly description: string;
  readonly inputSchema: { type: 'object'; properties: Record<string, object>; required: string[] };
  readonly annotations?: Record<string, boolean>;
  run(args: Record<string, unknown>): string;
}

// Plain JSON Schema through the low-level server API: the test needs no zod of its own.
const TOOLS: Record<string, TestTool> = {
  // Claims to be a closed-world read: a self-claim that must not skip the consent gate.
  lookup_ticket: {
    description: 'Look up a ticket',
    inputSchema: { type: 'object', properties: { id: { type: 'number' } }, required: ['id'] },
    annotations: { readOnlyHint: true, openWorldHint: false },
    run: (a) => `ticket ${String(a.id)}: printer on fire`,
  },
  // Named like a read, undeclared, and files a ticket when called.
  get_or_create_ticket: {
    description: 'Find or file a ticket',
    inputSchema: { type: 'object', properties: { subject: { type: 'string' } }, required: ['subject'] },
    run: (a) => `filed: ${String(a.subject)}`,
  },
  close_ticket: {
    description: 'Close a ticket',
    inputSchema: { type: 'object', properties: { id: { type: 'number' } }, required: ['id'] },
    annotations: { destructiveHint: true },
    run: () => 'closed',
  },
};

function mcpServer(): Server {
  const server = new Server({ name: 'tickets', version: '1.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: Object.entries(TOOLS).map(([name, t]) => ({ name, description: t.description, inputSchema: t.inputSchema, ...(t.annotations ? { annotations: t.annotations } : {}) })),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    const tool = TOOLS[req.params.name];
    if (tool === undefined) return { content: [{ type: 'text', text: `unknown tool ${req.params.name}` }], isError: true };
    invoked.push(req.params.name);
    return { content: [{ type: 'text', text: tool.run(req.params.arguments ?? {}) }] };
  });
  return server;
}

beforeAll(async () => {
  // One transport per session, created on the initialize request.
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  http = createServer(async (req, res) => {
    const sid = req.headers['mcp-session-id'];
    let transport = typeof sid === 'string' ? sessions.get(sid) : undefined;
    if (transport === undefined) {
      transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (id) => void sessions.set(id, transport!) });
      await mcpServer().connect(transport);
    }
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
});
afterAll(async () => {
  http.closeAllConnections();
  await new Promise<void>((resolve) => http.close(() => resolve()));
});

async function bridge(over: Partial<McpServerConfig> = {}): Promise<McpToolset> {
  return connectMcpServer({ name: 'tickets', trust: 'workspace', transport: { kind: 'http', url }, ...over });
}

describe('streamable-HTTP MCP server', () => {
  it('bridged tools: remote undeclared reads get external egress; self-claims change nothing', async () => {
    const set = await bridge();
    try {
      const byName = Object.fromEntries(set.tools.map((t) => [t.descriptor.name, t.descriptor]));
      expect(byName.tickets__lookup_ticket).toMatchObject({ access: 'read', transport: 'remote', origin: 'workspace', effects: { dataAccess: { egress: 'external' } } });
      expect(byName.tickets__get_or_create_ticket).toMatchObject({ access: 'read', effects: { dataAccess: { egress: 'external' } } });
      expect(byName.tickets__close_ticket).toMatchObject({ access: 'write' });
      expect(byName.tickets__close_ticket?.effects).toBeUndefined();
    } finally {
      await set.close();
    }
  });

  it.each([
    ['an undeclared remote read asks for consent, as a read', undefined, { isReadOnly: true, reason: 'consent_read', effects: { dataAccess: { egress: 'external' } } }],
    ['the author declaration wins: declared no-egress read runs ungated', { lookup_ticket: { access: 'read' as const, effects: { dataAccess: { egress: 'none' as const } } } }, null],
  ])('%s', async (_c, declarations, request) => {
    const set = await bridge(declarations ? { declarations } : {});
    try {
      const h = harnessFor([{ toolCalls: [{ name: 'tickets__lookup_ticket', arguments: { id: 4 } }] }, answer('done')], set.tools);
      const before = invoked.length;
      const r = await h.run();
      expect(r.settlement.kind).toBe('completed');
      expect(invoked.slice(before)).toEqual(['lookup_ticket']);
      if (request === null) expect(h.permission.requests).toEqual([]);
      else expect(h.permission.requests).toEqual([expect.objectContaining({ tool: 'tickets__lookup_ticket', ...request })]);
      expect(r.state.messages.find((m) => m.role === 'tool')).toMatchObject({ content: 'ticket 4: printer on fire', isError: false });
    } finally {
      await set.close();
    }
  });

  it('a shadow run captures the third-party get_or_create_* instead of calling it', async () => {
    const set = await bridge();
    try {
      const h = harnessFor([{ toolCalls: [{ name: 'tickets__get_or_create_ticket', arguments: { subject: 'printer' } }] }, answer('done')], set.tools, {
        mode: { kind: 'shadow', executableReads: ['tickets__get_or_create_ticket'] }, // even a host listing it cannot attest a workspace tool
      });
      const before = invoked.length;
      const r = await h.run();
      expect(invoked.slice(before)).toEqual([]);
      expect(r.events).toContainEqual(expect.objectContaining({ type: 'shadow_intent', tool: 'tickets__get_or_create_ticket' }));
      expect(r.events).toContainEqual(expect.objectContaining({ type: 'tool_result', outcome: 'shadow_denied', isError: true }));
    } finally {
      await set.close();
    }
  });

  it('a first-party remote server: registration annotations are declarations, nothing is synthesised', async () => {
    const set = await bridge({ trust: 'first_party' });
    try {
      const lookup = set.tools.find((t) => t.descriptor.name === 'tickets__lookup_ticket')!.descriptor;
      expect(lookup).toMatchObject({ access: 'read', origin: 'first_party' });
      expect(lookup.effects).toBeUndefined();
      // Undeclared first-party tool: name fallback, and the minting-read list makes it a write.
      expect(set.tools.find((t) => t.descriptor.name === 'tickets__get_or_create_ticket')!.descriptor.access).toBe('write');
    } finally {
      await set.close();
    }
  });
});
