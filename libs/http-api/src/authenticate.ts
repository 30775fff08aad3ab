/**
 * Authentication of every fleet HTTP route (intake and gate share the node's port): the one
 * implementation. A request authenticates by
 *
 *   - `Authorization: Bearer <token>` (an API client): the token's principal; no CSRF check,
 *     because a browser never attaches that header on its own; or
 *   - the console's session cookie `everdict_session` (a browser, after POST /v1/session): the
 *     session's principal, read from the CURRENT fleet config (a principal removed from the
 *     config is signed out everywhere at once). A cookie is attached by the browser to any
 *     request, so a mutating one (POST, PUT, PATCH, DELETE) must also carry `X-CSRF-Token`
 *     equal to the readable `everdict_csrf` cookie and to the session's stored CSRF hash —
 *     a page of another origin can send the cookie but cannot read it (double submit, checked
 *     against the server's copy); else 403 `csrf_failed`.
 *
 * A bearer header that is present but unknown is a 401; it never falls back to the cookie.
 */
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { sha256Hex } from '@everdict/contracts';
import { sendError } from './json.js';
import type { Principal, PrincipalDirectory } from './principals.js';

export const SESSION_COOKIE = 'everdict_session';
export const CSRF_COOKIE = 'everdict_csrf';
export const CSRF_HEADER = 'x-csrf-token';

/** The server side of web sessions (the store's web_sessions table), as the routes need it. */
export interface WebSessionLookup {
  /** The live (unexpired, unrevoked) session of a cookie value, or undefined. */
  lookup(sessionId: string): Promise<{ readonly principal: string; readonly csrfHash: string } | undefined>;
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Cookies of a request by name (the first of a repeated name wins); values are not decoded. Pure. */
export function readCookies(header: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const name = part.slice(0, eq).trim();
    if (!out.has(name)) out.set(name, part.slice(eq + 1).trim());
  }
  return out;
}

/** Whether `token` is the CSRF token whose stored hash is `csrfHash`, in constant time. Pure. */
export function csrfMatches(token: string, csrfHash: string): boolean {
  const presented = Buffer.from(`sha256:${sha256Hex(token)}`, 'utf8');
  const stored = Buffer.from(csrfHash, 'utf8');
  return presented.length === stored.length && timingSafeEqual(presented, stored);
}

function unauthenticated(res: ServerResponse, message: string): undefined {
  res.setHeader('www-authenticate', 'Bearer');
  sendError(res, 401, 'unauthenticated', message);
  return undefined;
}

/**
 * The principal of the request (bearer token or session cookie). Without one the request is
 * answered here — 401 `unauthenticated` with a `www-authenticate: Bearer` challenge, or 403
 * `csrf_failed` — and the result is undefined, so a route runs only for an authenticated
 * principal. Without `sessions` only bearer tokens authenticate.
 */
export async function authenticateRequest(req: IncomingMessage, res: ServerResponse, principals: PrincipalDirectory, sessions?: WebSessionLookup): Promise<Principal | undefined> {
  if (req.headers.authorization !== undefined) {
    return principals.authenticate(req.headers.authorization) ?? unauthenticated(res, 'a bearer token of a configured principal is required');
  }
  const cookies = readCookies(req.headers.cookie);
  const sessionId = cookies.get(SESSION_COOKIE);
  if (sessions === undefined || sessionId === undefined) return unauthenticated(res, 'a bearer token of a configured principal (or a console session) is required');
  const session = await sessions.lookup(sessionId);
  const principal = session ? principals.byId(session.principal) : undefined;
  if (!session || !principal) return unauthenticated(res, 'the console session is unknown, expired or signed out; sign in again');
  if (!SAFE_METHODS.has(req.method ?? 'GET')) {
    const header = req.headers[CSRF_HEADER];
    const cookie = cookies.get(CSRF_COOKIE);
    if (typeof header !== 'string' || header.length === 0 || header !== cookie || !csrfMatches(header, session.csrfHash)) {
      sendError(res, 403, 'csrf_failed', `a cookie-authenticated ${req.method ?? ''} needs the header X-CSRF-Token equal to the ${CSRF_COOKIE} cookie`, 'X-CSRF-Token');
      return undefined;
    }
  }
  return principal;
}
