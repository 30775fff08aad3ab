/**
 * A server that cannot answer is not a tool failing: a server that does not start or connect, a
 * stdio process that exits, a call that times out and an http server that went away all throw
 * McpUnavailable (code TOOL_UNAVAILABLE, the kernel's connector_down) and end the connection; a
 * protocol error the server answers with stays the tool's own error result.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { describe, expect, it } from 'vitest';
import { TOOL_UNAVAILABLE, unavailableConnector } from '@everdict/contracts';
import { connectMcpServer, McpUnavailable, type McpToolset } from '@everdict/mcp';

const FAULTY = fileURLToPath(new URL('./fixtures/faulty-server.mjs', import.meta.url));
const ctx = { taskId: 't', turn: 0, callId: 'c' };
const faulty = (callTimeoutMs = 30_000) => connectMcpServer({ name: 'faulty', trust: 'workspace', transport: { kind: 'stdio', command: process.execPath, args: [FAULTY] }, callTimeoutMs });
const tool = (set: McpToolset, name: string) => set.tools.find((t) => t.descriptor.name === `faulty__${name}`)!;

async function unavailable(p: Promise<unknown>): Promise<McpUnavailable> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(McpUnavailable);
  expect((err as McpUnavailable).code).toBe(TOOL_UNAVAILABLE);
  return err as McpUnavailable;
}

describe('a server that cannot answer', () => {
  it('does not start: connecting throws McpUnavailable naming the server as a connector', async () => {
    const err = await unavailable(connectMcpServer({ name: 'gone', trust: 'workspace', transport: { kind: 'stdio', command: process.execPath, args: ['-e', 'process.exit(3)'] }, callTimeoutMs: 5000 }));
    expect(unavailableConnector(err)).toBe('mcp:gone');
  });

  it('does not listen: connecting to an http endpoint nobody serves throws McpUnavailable', async () => {
    const http = createServer();
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const port = (http.address() as AddressInfo).port;
    await new Promise<void>((resolve) => http.close(() => resolve()));
    const err = await unavailable(connectMcpServer({ name: 'nobody', trust: 'workspace', transport: { kind: 'http', url: `http://127.0.0.1:${port}/mcp` }, callTimeoutMs: 5000 }));
    expect(err.message).not.toContain(String(port)); // endpoints are never echoed
  });

  it('crashes: the call throws, the connection is over, later calls throw too', async () => {
    const set = await faulty();
    expect(await tool(set, 'ok').invoke({}, ctx)).toEqual({ content: 'fine', isError: false });
    await unavailable(tool(set, 'crash').invoke({}, ctx));
    expect(set.connected).toBe(false);
    await unavailable(tool(set, 'ok').invoke({}, ctx));
    await set.close();
  });

  it('times out: the call throws and the hung server is let go', async () => {
    const set = await faulty(2000);
    const err = await unavailable(tool(set, 'hang').invoke({}, ctx));
    expect(err.message).toContain('timed out');
    expect(set.connected).toBe(false);
    await set.close();
  });

  it('answers with a protocol error: that is the tool failing, and the connection stays', async () => {
    const set = await faulty();
    const out = await tool(set, 'reject').invoke({}, ctx);
    expect(out.isError).toBe(true);
    expect(out.content).toContain('no such ticket');
    expect(set.connected).toBe(true);
    await set.close();
  });

  it('went away (http): the call throws McpUnavailable and the connection is over', async () => {
    const sessions = new Map<string, StreamableHTTPServerTransport>();
    const http: HttpServer = createServer(async (req, res) => {
      const sid = req.headers['mcp-session-id'];
      let transport = typeof sid === 'string' ? sessions.get(sid) : undefined;
      if (transport === undefined) {
        const created = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (id) => void sessions.set(id, created) });
        const server = new Server({ name: 'tickets', version: '1.0.0' }, { capabilities: { tools: {} } });
        server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: [{ name: 'lookup', description: 'Look up', inputSchema: { type: 'object' } }] }));
        server.setRequestHandler(CallToolRequestSchema, async () => ({ content: [{ type: 'text', text: 'found' }] }));
        await server.connect(created);
        transport = created;
      }
      await transport.handleRequest(req, res);
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const set = await connectMcpServer({ name: 'tickets', trust: 'workspace', transport: { kind: 'http', url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp` }, callTimeoutMs: 5000 });
    const lookup = set.tools[0]!;
    expect(await lookup.invoke({}, ctx)).toEqual({ content: 'found', isError: false });
    http.closeAllConnections();
    await new Promise<void>((resolve) => http.close(() => resolve()));
    await unavailable(lookup.invoke({}, ctx));
    expect(set.connected).toBe(false);
    await set.close();
  });
});
