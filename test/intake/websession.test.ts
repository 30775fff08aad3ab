/**
 * Console sign-in (issue 14 item 1) on a REAL node (`everdict start --service intake --service
 * gate`) over real Postgres: a bearer token exchanged for an HttpOnly, SameSite=Strict session
 * cookie and a readable CSRF cookie; the session authenticates intake AND gate routes (one port,
 * one implementation); a cookie-authenticated mutation without the CSRF header is refused and
 * writes nothing; a bearer request needs no CSRF token; sign-out and expiry end the session on
 * the server, not just in the browser.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '@everdict/contracts';
import { startConsoleNode } from './consoleNode.js';
import type { ConsoleNode } from './consoleNode.js';
import { TOKENS, count } from './helpers.js';

let node: ConsoleNode;

beforeAll(async () => {
  node = await startConsoleNode('intake_websession');
}, 120_000);

afterAll(async () => {
  await node?.stop();
});

interface Cookie {
  readonly name: string;
  readonly value: string;
  readonly attrs: string[];
}

function parseSetCookie(line: string): Cookie {
  const [pair, ...attrs] = line.split(';').map((s) => s.trim());
  const eq = pair!.indexOf('=');
  return { name: pair!.slice(0, eq), value: pair!.slice(eq + 1), attrs: attrs.map((a) => a.toLowerCase()) };
}

async function signIn(token: string, headers: Record<string, string> = {}): Promise<{ status: number; cookies: Map<string, Cookie> }> {
  const r = await fetch(`${node.url}/v1/session`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ token }) });
  await r.text();
  return { status: r.status, cookies: new Map(r.headers.getSetCookie().map(parseSetCookie).map((c) => [c.name, c])) };
}

/** A browser-like request: the cookies, and the CSRF header when given. */
async function asBrowser(method: string, path: string, s: { session: string; csrf: string }, opts: { csrfHeader?: string; body?: unknown } = {}) {
  const headers: Record<string, string> = { cookie: `everdict_session=${s.session}; everdict_csrf=${s.csrf}` };
  if (opts.csrfHeader !== undefined) headers['x-csrf-token'] = opts.csrfHeader;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const r = await fetch(`${node.url}${path}`, { method, headers, ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}) });
  const text = await r.text();
  return { status: r.status, headers: r.headers, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
}

async function session(token: string): Promise<{ session: string; csrf: string }> {
  const s = await signIn(token);
  expect(s.status).toBe(204);
  return { session: s.cookies.get('everdict_session')!.value, csrf: s.cookies.get('everdict_csrf')!.value };
}

describe('console sign-in: token → session cookie', () => {
  it('sets an HttpOnly SameSite=Strict session cookie and a readable CSRF cookie, storing only hashes', async () => {
    const s = await signIn(TOKENS.olga);
    expect(s.status).toBe(204);
    const sid = s.cookies.get('everdict_session')!;
    const csrf = s.cookies.get('everdict_csrf')!;
    expect(sid.value).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(sid.attrs).toEqual(expect.arrayContaining(['httponly', 'samesite=strict', 'path=/', 'max-age=43200']));
    // Plain HTTP: no Secure (the browser would drop it); the page must read the CSRF cookie.
    expect(sid.attrs).not.toContain('secure');
    expect(csrf.attrs).toEqual(expect.arrayContaining(['samesite=strict', 'path=/']));
    expect(csrf.attrs).not.toContain('httponly');
    expect(csrf.value).not.toBe(sid.value);

    const rows = (await node.db.query<{ id_hash: string; principal: string; csrf_hash: string; ttl: number }>({ text: `SELECT id_hash, principal, csrf_hash, extract(epoch FROM expires_at - created_at)::int AS ttl FROM web_sessions` })).rows;
    const mine = rows.find((r) => r.id_hash === `sha256:${sha256Hex(sid.value)}`);
    expect(mine).toMatchObject({ principal: 'olga', csrf_hash: `sha256:${sha256Hex(csrf.value)}`, ttl: 12 * 3600 });
    // No usable credential is stored: neither cookie value appears in the table.
    expect(JSON.stringify(rows)).not.toContain(sid.value);
    expect(JSON.stringify(rows)).not.toContain(csrf.value);
  });

  it('marks the cookies Secure when the request came over TLS (a terminating proxy says so)', async () => {
    const s = await signIn(TOKENS.olga, { 'x-forwarded-proto': 'https' });
    expect(s.cookies.get('everdict_session')!.attrs).toContain('secure');
    expect(s.cookies.get('everdict_csrf')!.attrs).toContain('secure');
  });

  it('refuses an unknown or malformed token without a session', async () => {
    const before = await count(node.db, 'SELECT 1 FROM web_sessions');
    expect((await signIn('not-a-configured-token')).status).toBe(401);
    const bad = await fetch(`${node.url}/v1/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: 7 }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { field: string }).field).toBe('token');
    expect(await count(node.db, 'SELECT 1 FROM web_sessions')).toBe(before);
  });

  it('GET /v1/session names the principal, its roles and customers (401 without a session)', async () => {
    const s = await session(TOKENS.acme);
    const me = await asBrowser('GET', '/v1/session', s);
    expect(me.status).toBe(200);
    expect(me.body).toEqual({ principal: 'acme', roles: ['customer'], customers: ['acme'] });
    const anon = await fetch(`${node.url}/v1/session`);
    expect(anon.status).toBe(401);
    const forged = await asBrowser('GET', '/v1/session', { session: 'x'.repeat(43), csrf: s.csrf });
    expect(forged.status).toBe(401);
  });
});

describe('the session authenticates every route of the node; mutations need the CSRF token', () => {
  it('reads intake and gate routes with the cookie alone', async () => {
    const s = await session(TOKENS.olga);
    expect((await asBrowser('GET', '/v1/cases', s)).status).toBe(200);
    expect((await asBrowser('GET', '/v1/gates', s)).status).toBe(200);
    expect((await asBrowser('GET', '/v1/fleet', s)).status).toBe(200);
  });

  it('refuses a cookie-authenticated POST without, or with a wrong, X-CSRF-Token — and writes nothing', async () => {
    const s = await session(TOKENS.acme);
    const body = { caseType: 'support', title: 'csrf probe', originKey: 'csrf-probe' };
    const none = await asBrowser('POST', '/v1/cases', s, { body });
    expect(none.status).toBe(403);
    expect(none.body).toMatchObject({ error: 'csrf_failed', field: 'X-CSRF-Token' });
    const wrong = await asBrowser('POST', '/v1/cases', s, { body, csrfHeader: 'A'.repeat(43) });
    expect(wrong.status).toBe(403);
    // Another session's CSRF token (valid, but not this session's) is refused as well.
    const other = await session(TOKENS.acme);
    const crossed = await asBrowser('POST', '/v1/cases', { session: s.session, csrf: other.csrf }, { body, csrfHeader: other.csrf });
    expect(crossed.status).toBe(403);
    expect(await count(node.db, `SELECT 1 FROM cases WHERE title = 'csrf probe'`)).toBe(0);
    // The gate's routes share the implementation: a decide without the token is refused first.
    const gate = await asBrowser('POST', '/v1/gates/00000000-0000-4000-8000-000000000000/decide', s, { body: {} });
    expect(gate.status).toBe(403);
    expect(gate.body['error']).toBe('csrf_failed');

    const ok = await asBrowser('POST', '/v1/cases', s, { body, csrfHeader: s.csrf });
    expect(ok.status).toBe(201);
    expect(await count(node.db, `SELECT 1 FROM cases WHERE title = 'csrf probe'`)).toBe(1);
  });

  it('needs no CSRF token for a bearer request', async () => {
    const r = await fetch(`${node.url}/v1/cases`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKENS.acme}`, 'content-type': 'application/json' },
      body: JSON.stringify({ caseType: 'support', title: 'bearer write', originKey: 'bearer-write' }),
    });
    expect(r.status).toBe(201);
  });

  it('never falls back to the cookie when a bearer header is present but unknown', async () => {
    const s = await session(TOKENS.olga);
    const r = await fetch(`${node.url}/v1/cases`, { headers: { authorization: 'Bearer unknown-token-123', cookie: `everdict_session=${s.session}` } });
    expect(r.status).toBe(401);
  });
});

describe('sign-out and expiry end the session on the server', () => {
  it('DELETE /v1/session needs the CSRF token, revokes the session and clears both cookies', async () => {
    const s = await session(TOKENS.olga);
    expect((await asBrowser('DELETE', '/v1/session', s)).status).toBe(403);
    expect((await asBrowser('GET', '/v1/session', s)).status).toBe(200);
    const out = await asBrowser('DELETE', '/v1/session', s, { csrfHeader: s.csrf });
    expect(out.status).toBe(204);
    const cleared = out.headers.getSetCookie().map(parseSetCookie);
    expect(cleared.map((c) => [c.name, c.value])).toEqual([
      ['everdict_session', ''],
      ['everdict_csrf', ''],
    ]);
    expect(cleared.every((c) => c.attrs.includes('max-age=0'))).toBe(true);
    // A copy of the old cookie (a stolen one, or a browser that ignored the clear) is dead.
    expect((await asBrowser('GET', '/v1/session', s)).status).toBe(401);
    expect((await asBrowser('GET', '/v1/cases', s)).status).toBe(401);
    expect(await count(node.db, `SELECT 1 FROM web_sessions WHERE id_hash = $1 AND revoked_at IS NOT NULL`, [`sha256:${sha256Hex(s.session)}`])).toBe(1);
  });

  it('refuses a session past its expiry (database clock)', async () => {
    const s = await session(TOKENS.olga);
    expect((await asBrowser('GET', '/v1/cases', s)).status).toBe(200);
    await node.db.query({ text: `UPDATE web_sessions SET created_at = now() - interval '13 hours', expires_at = now() - interval '1 hour' WHERE id_hash = $1`, values: [`sha256:${sha256Hex(s.session)}`] });
    const r = await asBrowser('GET', '/v1/cases', s);
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toBe('Bearer');
  });
});
