/** The bridge against a real MCP server from the registry (server-everything) over stdio. */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answer, harnessFor } from './kernel-harness.js';
import { connectMcpServer, type McpToolset } from '@everdict/mcp';

const EVERYTHING = fileURLToPath(new URL('../../../node_modules/@modelcontextprotocol/server-everything/dist/index.js', import.meta.url));

let everything: McpToolset;
beforeAll(async () => {
  everything = await connectMcpServer({ name: 'everything', trust: 'workspace', transport: { kind: 'stdio', command: process.execPath, args: [EVERYTHING, 'stdio'] } });
});
afterAll(() => everything?.close());

describe('stdio MCP server (server-everything)', () => {
  it('bridges its tools as declared workspace reads with no synthesised effects', () => {
    const echo = everything.tools.find((t) => t.descriptor.name === 'everything__echo');
    expect(echo?.descriptor).toMatchObject({ access: 'read', origin: 'workspace', transport: 'stdio', argumentValidation: 'server' });
    expect(echo?.descriptor.effects).toBeUndefined();
    expect(everything.tools.map((t) => t.descriptor.name)).toContain('everything__get-sum');
  });

  it('invokes tools; the server validates arguments', async () => {
    const sum = everything.tools.find((t) => t.descriptor.name === 'everything__get-sum')!;
    const ctx = { taskId: 't', turn: 0, callId: 'c' };
    expect(await sum.invoke({ a: 2, b: 3 }, ctx)).toEqual({ content: 'The sum of 2 and 3 is 5.', isError: false });
    const bad = await sum.invoke({ a: 'two' }, ctx);
    expect(bad.isError).toBe(true);
  });

  it('a kernel run calls a stdio read without asking for consent', async () => {
    const h = harnessFor([{ toolCalls: [{ name: 'everything__echo', arguments: { message: 'hi' } }] }, answer('done')], everything.tools);
    const r = await h.run();
    expect(r.settlement).toEqual({ kind: 'completed', result: 'done' });
    expect(h.permission.requests).toEqual([]);
    expect(r.state.messages.find((m) => m.role === 'tool')).toMatchObject({ content: 'Echo: hi', isError: false });
  });
});
