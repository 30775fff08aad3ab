import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PrincipalDirectory, RequestError, authenticateRequest, readJsonObject, seesCustomer, sendJson, sendRequestError, tokenHash } from '@everdict/http-api';

describe('PrincipalDirectory', () => {
  const dir = new PrincipalDirectory({
    alice: { tokenHash: tokenHash('alice-secret-token'), roles: ['dba'] },
    bob: { tokenHash: tokenHash('bob-secret-token'), roles: ['finance'], customers: ['acme'] },
  });
  it('names the principal of a bearer token by its sha256', () => {
    expect(tokenHash('x')).toBe('sha256:2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881');
    expect(dir.authenticate('Bearer alice-secret-token')).toEqual({ id: 'alice', roles: ['dba'], customers: null });
    expect(dir.authenticate('Bearer bob-secret-token')?.customers).toEqual(['acme']);
  });
  it('refuses unknown, malformed and missing tokens', () => {
    expect(dir.authenticate(undefined)).toBeUndefined();
    expect(dir.authenticate('Bearer nobody-knows-this')).toBeUndefined();
    expect(dir.authenticate('Basic alice-secret-token')).toBeUndefined();
    expect(dir.authenticate('Bearer short')).toBeUndefined();
  });
  it('scopes customers', () => {
    expect(seesCustomer({ id: 'a', roles: [], customers: null }, 'x')).toBe(true);
    expect(seesCustomer({ id: 'b', roles: [], customers: ['acme'] }, 'x')).toBe(false);
  });
});

describe('JSON over HTTP', () => {
  const LIMIT = 64;
  const principals = new PrincipalDirectory({ alice: { tokenHash: tokenHash('alice-secret-token'), roles: ['dba'] } });
  let server: Server;
  let base: string;

  beforeAll(async () => {
    server = createServer((req, res) => {
      void (async () => {
        const principal = await authenticateRequest(req, res, principals);
        if (!principal) return;
        try {
          sendJson(res, 200, { principal: principal.id, body: await readJsonObject(req, LIMIT) });
        } catch (err) {
          if (err instanceof RequestError) return sendRequestError(res, err);
          throw err;
        }
      })();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const post = async (body: string, headers: Record<string, string> = {}) => {
    const res = await fetch(base, { method: 'POST', body, headers: { authorization: 'Bearer alice-secret-token', 'content-type': 'application/json', ...headers } });
    return { status: res.status, headers: res.headers, text: await res.text() };
  };

  it('answers a JSON object with exact headers', async () => {
    const r = await post('{"a":1}');
    expect(r.status).toBe(200);
    expect(r.text).toBe('{"principal":"alice","body":{"a":1}}');
    expect([r.headers.get('content-type'), r.headers.get('cache-control'), r.headers.get('content-length')]).toEqual(['application/json', 'no-store', String(r.text.length)]);
  });

  it('challenges a request without a known bearer token', async () => {
    const r = await post('{}', { authorization: 'Bearer nobody-knows-this' });
    expect([r.status, r.headers.get('www-authenticate'), r.text]).toEqual([401, 'Bearer', '{"error":"unauthenticated","message":"a bearer token of a configured principal is required"}']);
  });

  it('refuses other media types, oversized, malformed and non-object bodies', async () => {
    expect(await post('{}', { 'content-type': 'text/plain' })).toMatchObject({ status: 415, text: '{"error":"unsupported_media_type","message":"the body must be application/json"}' });
    expect(await post(`{"a":"${'x'.repeat(LIMIT)}"}`)).toMatchObject({ status: 413, text: `{"error":"body_too_large","message":"the body exceeds ${LIMIT} bytes"}` });
    expect(await post('{nope')).toMatchObject({ status: 400, text: '{"error":"invalid_json","message":"the body is not valid JSON","field":"body"}' });
    expect(await post('[1]')).toMatchObject({ status: 400, text: '{"error":"invalid_body","message":"the body must be a JSON object","field":"body"}' });
  });
});
