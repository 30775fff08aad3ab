/** Web session statements (migration 0017): only hashes of the cookie and CSRF values are stored. */
import type { Sql } from '../db.js';

export interface WebSessionRow {
  principal: string;
  csrf_hash: string;
  expires_at: Date;
}

export function insertWebSession(r: { idHash: string; principal: string; csrfHash: string; ttlMs: number }): Sql {
  return {
    text: `INSERT INTO web_sessions (id_hash, principal, csrf_hash, expires_at)
           VALUES ($1::text, $2::text, $3::text, now() + $4::int * interval '1 millisecond')
           RETURNING principal, csrf_hash, expires_at`,
    values: [r.idHash, r.principal, r.csrfHash, r.ttlMs],
  };
}

/** A session that is neither revoked nor expired on the database clock. */
export function selectLiveWebSession(idHash: string): Sql {
  return {
    name: 'ev_live_web_session',
    text: 'SELECT principal, csrf_hash, expires_at FROM web_sessions WHERE id_hash = $1::text AND revoked_at IS NULL AND expires_at > now()',
    values: [idHash],
  };
}

export function revokeWebSession(idHash: string): Sql {
  return { text: 'UPDATE web_sessions SET revoked_at = now() WHERE id_hash = $1::text AND revoked_at IS NULL', values: [idHash] };
}

/** Sessions past their expiry or revoked for a day are dead weight; the rows carry no history. */
export function deleteDeadWebSessions(): Sql {
  return { text: `DELETE FROM web_sessions WHERE expires_at < now() - interval '1 day' OR revoked_at < now() - interval '1 day'` };
}
