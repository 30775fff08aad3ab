import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendError } from './json.js';
import type { Principal, PrincipalDirectory } from './principals.js';

/**
 * The principal of the request's bearer token. Without a known one the request is answered
 * here — 401 `unauthenticated` with a `www-authenticate: Bearer` challenge — and the result is
 * undefined, so a route runs only for an authenticated principal.
 */
export function authenticateRequest(req: IncomingMessage, res: ServerResponse, principals: PrincipalDirectory): Principal | undefined {
  const principal = principals.authenticate(req.headers.authorization);
  if (!principal) {
    res.setHeader('www-authenticate', 'Bearer');
    sendError(res, 401, 'unauthenticated', 'a bearer token of a configured principal is required');
  }
  return principal;
}
