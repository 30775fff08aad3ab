/**
 * Browser sessions of the operator console (migration 0017): a bearer token is exchanged once
 * for a random session id (the HttpOnly cookie) and a random CSRF token (a readable cookie the
 * page echoes in `X-CSRF-Token`). Both are 256-bit random values; only their sha256 is stored, so
 * the table never holds a usable credential. The session names a principal, not its roles: the
 * caller resolves roles and customers from the current fleet config at every request.
 */
import { randomBytes } from 'node:crypto';
import { sha256Hex } from '@everdict/contracts';
import type { Queryable } from './db.js';
import { deleteDeadWebSessions, insertWebSession, revokeWebSession, selectLiveWebSession } from './sql/webSessions.js';

/** Default lifetime of a console session: one working day. */
export const WEB_SESSION_TTL_MS = 12 * 60 * 60 * 1000;

export interface WebSession {
  readonly principal: string;
  /** `sha256:<hex>` of the session's CSRF token. */
  readonly csrfHash: string;
  readonly expiresAt: Date;
}

export interface IssuedWebSession extends WebSession {
  /** The cookie value (returned once, never stored). */
  readonly sessionId: string;
  /** The CSRF token (returned once, never stored). */
  readonly csrfToken: string;
}

/** The stored form of a session id or CSRF token. */
export function webSecretHash(secret: string): string {
  return `sha256:${sha256Hex(secret)}`;
}

const SECRET = /^[A-Za-z0-9_-]{43}$/;

/** Whether a presented cookie value can be a session id at all (checked before any query). */
export function isWebSecret(v: string): boolean {
  return SECRET.test(v);
}

export async function createWebSession(db: Queryable, principal: string, ttlMs = WEB_SESSION_TTL_MS): Promise<IssuedWebSession> {
  const sessionId = randomBytes(32).toString('base64url');
  const csrfToken = randomBytes(32).toString('base64url');
  const { rows } = await db.query<{ principal: string; csrf_hash: string; expires_at: Date }>(
    insertWebSession({ idHash: webSecretHash(sessionId), principal, csrfHash: webSecretHash(csrfToken), ttlMs: Math.max(1, Math.round(ttlMs)) }),
  );
  const r = rows[0]!;
  return { sessionId, csrfToken, principal: r.principal, csrfHash: r.csrf_hash, expiresAt: r.expires_at };
}

/** The live session of a cookie value, or undefined (unknown, revoked or expired). */
export async function loadWebSession(db: Queryable, sessionId: string): Promise<WebSession | undefined> {
  if (!isWebSecret(sessionId)) return undefined;
  const r = (await db.query<{ principal: string; csrf_hash: string; expires_at: Date }>(selectLiveWebSession(webSecretHash(sessionId)))).rows[0];
  return r ? { principal: r.principal, csrfHash: r.csrf_hash, expiresAt: r.expires_at } : undefined;
}

/** Revokes a session; true when it was live. Idempotent. */
export async function revokeWebSessionById(db: Queryable, sessionId: string): Promise<boolean> {
  if (!isWebSecret(sessionId)) return false;
  return (await db.query(revokeWebSession(webSecretHash(sessionId)))).rowCount > 0;
}

/** Deletes sessions dead for over a day; returns how many. */
export async function pruneWebSessions(db: Queryable): Promise<number> {
  return (await db.query(deleteDeadWebSessions())).rowCount;
}

/** The sessions as the HTTP routes look them up (@everdict/http-api's WebSessionLookup, structurally). */
export function webSessionLookup(db: Queryable): { lookup(sessionId: string): Promise<WebSession | undefined> } {
  return { lookup: (sessionId) => loadWebSession(db, sessionId) };
}
