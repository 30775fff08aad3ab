/** A provider's 429/503 `Retry-After`, over real HTTP, reaches the classified ModelError. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { classifyHttpFailure, isModelError, openAiClient } from '@everdict/llm';

let server: Server;
let base = '';
let reply: { status: number; headers: Record<string, string> } = { status: 429, headers: {} };

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
      res.end(JSON.stringify({ error: { message: 'slow down', code: 'rate_limit_exceeded' } }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});
afterAll(async () => new Promise<void>((r) => server.close(() => r())));

const failure = async () => {
  const client = openAiClient({ route: { name: 'r', adapter: 'openai', model: 'm', configHash: 'sha256:test' }, baseUrl: base, timeoutMs: 5_000 });
  try {
    await client.complete({ system: 's', messages: [{ role: 'user', content: 'hi' }], tools: [] });
  } catch (err) {
    if (isModelError(err)) return err;
    throw err;
  }
  throw new Error('the call succeeded');
};

describe('Retry-After', () => {
  it.each([
    [429, { 'retry-after': '7' }, 7_000],
    [503, { 'retry-after': '2' }, 2_000],
    [429, {}, undefined],
    [429, { 'retry-after': 'soon' }, undefined],
    [500, { 'retry-after': '7' }, undefined], // only 429 and 503 define it
  ])('%i %j → retryAfterMs %s', async (status, headers, ms) => {
    reply = { status, headers };
    const err = await failure();
    expect(err.kind).toBe('retryable');
    expect(err.retryAfterMs).toBe(ms);
  });

  it('an HTTP-date Retry-After is read against now', async () => {
    reply = { status: 429, headers: { 'retry-after': new Date(Date.now() + 20_000).toUTCString() } };
    const err = await failure();
    expect(err.retryAfterMs).toBeGreaterThan(15_000);
    expect(err.retryAfterMs).toBeLessThanOrEqual(20_000);
  });

  it('classifyHttpFailure keeps it only on 429/503', () => {
    expect(classifyHttpFailure('openai', 429, '', 5_000).retryAfterMs).toBe(5_000);
    expect(classifyHttpFailure('openai', 400, '', 5_000).retryAfterMs).toBeUndefined();
  });
});
