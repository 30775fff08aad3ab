/**
 * A real streamable-HTTP MCP endpoint on 127.0.0.1 for tests: one MCP `Server` (built by the
 * test, with its own tools and counters) per session, the SDK's transport doing the protocol.
 * It can be stopped and started again on the same port (a server that is down, then back), and
 * can refuse connections (`admit` false: each socket is destroyed on arrival) or drop every open
 * connection mid-call (`dropConnections`), so a test can make it fail the way a real one does.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';

export interface McpHttpServer {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Closes every open connection now (requests in flight get no answer). */
  dropConnections(): void;
  /** The endpoint URL; its port is fixed by the first start. */
  url(): string;
}

export function mcpHttpServer(build: () => Server, o: { admit?: () => boolean } = {}): McpHttpServer {
  let http: HttpServer | null = null;
  let port = 0;
  return {
    async start() {
      const sessions = new Map<string, StreamableHTTPServerTransport>();
      const server = createServer(async (req, res) => {
        if (o.admit && !o.admit()) return void req.socket.destroy();
        const sid = req.headers['mcp-session-id'];
        let transport = typeof sid === 'string' ? sessions.get(sid) : undefined;
        if (transport === undefined) {
          const created = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (id) => void sessions.set(id, created) });
          await build().connect(created);
          transport = created;
        }
        await transport.handleRequest(req, res);
      });
      await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
      port = (server.address() as AddressInfo).port;
      http = server;
    },
    async stop() {
      const h = http;
      http = null;
      if (h === null) return;
      h.closeAllConnections();
      await new Promise<void>((resolve) => h.close(() => resolve()));
    },
    dropConnections() {
      http?.closeAllConnections();
    },
    url: () => `http://127.0.0.1:${port}/mcp`,
  };
}
