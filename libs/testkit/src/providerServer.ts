/** A local HTTP server that answers like a model provider, one programmed reply per request (adapter and loop tests). */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

interface ProgrammedReply {
  readonly status: number;
  readonly body: string;
  /** Delay before answering (to provoke client timeouts). */
  readonly delayMs?: number;
}

interface ReceivedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: unknown;
}

export async function providerServer(): Promise<{ baseUrl: string; received: ReceivedRequest[]; reply: (...r: ProgrammedReply[]) => void; close: () => Promise<void> }> {
  const queue: ProgrammedReply[] = [];
  const received: ReceivedRequest[] = [];
  const timers = new Set<NodeJS.Timeout>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: text === '' ? null : JSON.parse(text) });
      const next = queue.shift() ?? { status: 500, body: '{"error":{"message":"no programmed reply"}}' };
      const send = () => {
        if (res.destroyed) return;
        res.writeHead(next.status, { 'content-type': 'application/json' });
        res.end(next.body);
      };
      if (next.delayMs) {
        const t = setTimeout(() => (timers.delete(t), send()), next.delayMs);
        timers.add(t);
      } else send();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    received,
    reply: (...r) => queue.push(...r),
    close: async () => {
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A port on 127.0.0.1 that nothing listens on. */
export async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}
