/**
 * Console sign-in (issue 14 item 1): a bearer token exchanged for a browser session.
 *
 *   POST   /v1/session  {"token": "<bearer token>"}  → 204 + Set-Cookie everdict_session (HttpOnly,
 *                       SameSite=Strict, Path=/, Secure over TLS) and everdict_csrf (readable by
 *                       the page, which echoes it in X-CSRF-Token on every mutation)
 *   GET    /v1/session  → 200 {principal, roles, customers|null}, or 401
 *   DELETE /v1/session  signs out: the session is revoked server-side and both cookies cleared
 *
 * The token is checked exactly like an `Authorization: Bearer` header and never stored; the
 * session row holds hashes only (libs/store webSessions.ts). Every other route authenticates
 * the cookie through @everdict/http-api's authenticateRequest, CSRF included.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { CSRF_COOKIE, RequestError, SESSION_COOKIE, authenticateRequest, readCookies, readJsonObject, sendError, sendJson } from '@everdict/http-api';
import type { PrincipalDirectory, WebSessionLookup } from '@everdict/http-api';
import { WEB_SESSION_TTL_MS, createWebSession, revokeWebSessionById } from '@everdict/store';
import type { Store } from '@everdict/store';

interface WebSessionOptions {
  readonly store: Store;
  readonly principals: () => PrincipalDirectory;
  readonly sessions: WebSessionLookup;
  readonly ttlMs?: number;
  readonly maxBodyBytes: number;
}

const TOKEN = /^[\x21-\x7e]{8,512}$/;

/** Whether the request reached us over TLS (directly, or through a proxy that says so). */
export function cameOverTls(req: IncomingMessage): boolean {
  return (req.socket as Partial<TLSSocket>).encrypted === true || req.headers['x-forwarded-proto'] === 'https';
}

/** The Set-Cookie values of a new session, or of a sign-out (`maxAgeSeconds` 0). Pure. */
export function sessionCookies(sessionId: string, csrfToken: string, maxAgeSeconds: number, secure: boolean): string[] {
  const common = `Path=/; Max-Age=${maxAgeSeconds}; SameSite=Strict${secure ? '; Secure' : ''}`;
  return [`${SESSION_COOKIE}=${sessionId}; ${common}; HttpOnly`, `${CSRF_COOKIE}=${csrfToken}; ${common}`];
}

/** Answers /v1/session; false for any other path. */
export async function webSessionRoute(o: WebSessionOptions, req: IncomingMessage, res: ServerResponse): Promise<boolean> {
  const m = req.method ?? '';
  if (m === 'POST') {
    const body = await readJsonObject(req, o.maxBodyBytes);
    const token = body['token'];
    if (typeof token !== 'string' || !TOKEN.test(token)) throw new RequestError(400, 'invalid_body', 'token must be a bearer token (8–512 printable ASCII characters)', 'token');
    const principal = o.principals().authenticate(`Bearer ${token}`);
    if (!principal) return (sendError(res, 401, 'unauthenticated', 'the token is not one of a configured principal', 'token'), true);
    const ttlMs = o.ttlMs ?? WEB_SESSION_TTL_MS;
    const s = await createWebSession(o.store.db, principal.id, ttlMs);
    res.statusCode = 204;
    res.setHeader('set-cookie', sessionCookies(s.sessionId, s.csrfToken, Math.floor(ttlMs / 1000), cameOverTls(req)));
    res.setHeader('cache-control', 'no-store');
    res.end();
    return true;
  }
  if (m !== 'GET' && m !== 'DELETE') return (sendError(res, 405, 'method_not_allowed', `${m} is not allowed here`), true);
  const principal = await authenticateRequest(req, res, o.principals(), o.sessions);
  if (!principal) return true;
  if (m === 'GET') return (sendJson(res, 200, { principal: principal.id, roles: principal.roles, customers: principal.customers }), true);
  const sessionId = readCookies(req.headers.cookie).get(SESSION_COOKIE);
  if (sessionId !== undefined) await revokeWebSessionById(o.store.db, sessionId);
  res.statusCode = 204;
  res.setHeader('set-cookie', sessionCookies('', '', 0, cameOverTls(req)));
  res.setHeader('cache-control', 'no-store');
  res.end();
  return true;
}
