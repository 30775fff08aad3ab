/**
 * Secret hygiene shared by config errors, log lines and readiness reports.
 *
 * Invariant: a credential that reached the process through the environment (a URL password, an
 * API token) never leaves it through a log line, an error message or an HTTP body. Two layers
 * enforce it: keys that name a secret are censored wherever they appear, and any string that
 * looks like a URL with userinfo has its password replaced.
 */

export const CENSORED = '[Redacted]';
const OMITTED = '[Omitted]';

/** Keys (compared case-insensitively, ignoring `_` and `-`) whose values are credentials. */
const SECRET_KEYS = new Set([
  'password', 'passwd', 'pwd',
  'token', 'accesstoken', 'refreshtoken', 'idtoken', 'bearertoken', 'apitoken',
  'authorization', 'proxyauthorization',
  'apikey', 'xapikey',
  'secret', 'clientsecret',
  'cookie', 'setcookie',
  'privatekey',
  'databaseurl', 'amqpurl', 'connectionstring',
]);

/**
 * Keys whose values are model or customer content (prompts, transcripts, message bodies). They are
 * omitted, not censored: logs carry safe ids, durations and outcome classes only; content lives in
 * papers, where it is access-controlled and content-addressed.
 */
const CONTENT_KEYS = new Set(['prompt', 'prompts', 'content', 'completion', 'transcript', 'body', 'payload']);

function normaliseKey(key: string): string {
  return key.toLowerCase().replace(/[-_]/g, '');
}

function isSecretKey(key: string): boolean {
  return SECRET_KEYS.has(normaliseKey(key));
}

function isContentKey(key: string): boolean {
  return CONTENT_KEYS.has(normaliseKey(key));
}

// scheme://user:password@ — the password part is everything up to the last '@' of the authority.
const URL_USERINFO = /\b([a-z][a-z0-9+.-]*:\/\/)([^\s:/?#@]*):([^\s/?#]*)@/gi;

/** Replaces the password of every `scheme://user:password@host` inside `text`. */
export function redactUrlCredentials(text: string): string {
  return text.replace(URL_USERINFO, (_m, scheme: string, user: string) => `${scheme}${user}:${CENSORED}@`);
}

const MAX_DEPTH = 8;

/**
 * A copy of `value` with secret keys censored, content keys omitted and URL passwords removed from
 * strings. Plain objects and arrays are walked (to a bounded depth); other objects are returned as
 * they are so serializers (errors, requests) still see their own types.
 */
export function scrubSecrets<T>(value: T, depth = 0): T {
  if (typeof value === 'string') return redactUrlCredentials(value) as T;
  if (value === null || typeof value !== 'object' || depth >= MAX_DEPTH) return value;
  if (Array.isArray(value)) return value.map((v: unknown) => scrubSecrets(v, depth + 1)) as T;
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    if (v === undefined) continue;
    if (isSecretKey(key)) out[key] = CENSORED;
    else if (isContentKey(key)) out[key] = OMITTED;
    else out[key] = scrubSecrets(v, depth + 1);
  }
  return out as T;
}
