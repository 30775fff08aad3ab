/**
 * HMAC-SHA256 webhook signatures over the RAW request body. Pure (the time is passed in).
 *
 * Schemes:
 * - `github`: header `X-Hub-Signature-256: sha256=<hex>`, HMAC over the body. GitHub sends no
 *   timestamp; a replayed delivery carries the same `X-GitHub-Delivery` and so the same origin
 *   key, which intake dedups — a replay cannot open a second case.
 * - `hmac-sha256`: a configurable header holding `<prefix><hex|base64>`. With `timestamp`, the
 *   sender also sends the Unix time (seconds) in another header and signs
 *   `<timestamp>.<raw body>`; requests outside `toleranceSeconds` of now (either direction) are
 *   refused, so a captured request cannot be replayed later with a new delivery id.
 *
 * Comparison is constant-time over the decoded digests (`timingSafeEqual`). Several secrets may
 * be configured at once so a secret can be rotated without downtime: any one verifying is enough.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { EverdictError } from '@everdict/contracts';
import { WebhookUnauthenticated } from './errors.js';

export type SignatureScheme =
  | { kind: 'github' }
  | {
      kind: 'hmac-sha256';
      /** Header carrying the signature (case-insensitive). */
      header: string;
      /** Digest encoding. Default `hex`. */
      encoding?: 'hex' | 'base64';
      /** Text before the digest, e.g. `sha256=`. Default none. */
      prefix?: string;
      /** When set, the signed content is `<timestamp>.<body>` and stale requests are refused. */
      timestamp?: { header: string; /** Default 300. */ toleranceSeconds?: number };
    };

/** Node's IncomingHttpHeaders shape, or any plain header map. Lookup is case-insensitive. */
export type HeaderBag = Readonly<Record<string, string | readonly string[] | undefined>>;

const GITHUB_SIGNATURE_HEADER = 'x-hub-signature-256';
const DEFAULT_TIMESTAMP_TOLERANCE_SECONDS = 300;
const DIGEST_BYTES = 32;
/** Below this a shared secret is guessable; configs with shorter secrets are refused. */
const MIN_SECRET_LENGTH = 16;

type HeaderLookup = { kind: 'absent' } | { kind: 'ambiguous' } | { kind: 'value'; value: string };

/** A single header value; several values for one header are ambiguous and refused. */
export function headerValue(headers: HeaderBag, name: string): HeaderLookup {
  const wanted = name.toLowerCase();
  const values: string[] = [];
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() !== wanted || v === undefined) continue;
    if (typeof v === 'string') values.push(v);
    else values.push(...v);
  }
  if (values.length === 0) return { kind: 'absent' };
  if (values.length > 1) return { kind: 'ambiguous' };
  return { kind: 'value', value: values[0] as string };
}

/** Checks a scheme and its secrets once, at configuration time. */
export function checkSignatureConfig(scheme: SignatureScheme, secrets: readonly string[], path: string): void {
  const bad = (field: string, problem: string): never => {
    throw new EverdictError('invalid_config', `${path}.${field} ${problem}`, { details: { path: `${path}.${field}` } });
  };
  if (secrets.length === 0) bad('secrets', 'must name at least one secret');
  secrets.forEach((s, i) => {
    if (typeof s !== 'string' || s.length < MIN_SECRET_LENGTH) bad(`secrets[${i}]`, `must be at least ${MIN_SECRET_LENGTH} characters`);
  });
  if (scheme.kind === 'hmac-sha256') {
    if (!/^[A-Za-z0-9-]+$/.test(scheme.header)) bad('signature.header', 'must be an HTTP header name');
    if (scheme.timestamp !== undefined) {
      if (!/^[A-Za-z0-9-]+$/.test(scheme.timestamp.header)) bad('signature.timestamp.header', 'must be an HTTP header name');
      const tol = scheme.timestamp.toleranceSeconds ?? DEFAULT_TIMESTAMP_TOLERANCE_SECONDS;
      if (!Number.isFinite(tol) || tol <= 0) bad('signature.timestamp.toleranceSeconds', 'must be a positive number');
    }
  }
}

function decodeDigest(text: string, encoding: 'hex' | 'base64'): Buffer | null {
  if (encoding === 'hex') {
    return /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : null;
  }
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text)) return null;
  const buf = Buffer.from(text, 'base64');
  return buf.length === DIGEST_BYTES ? buf : null;
}

function hmac(secret: string, parts: ReadonlyArray<string | Uint8Array>): Buffer {
  const h = createHmac('sha256', secret);
  for (const p of parts) h.update(p);
  return h.digest();
}

/**
 * Throws `WebhookUnauthenticated` unless the request is signed by one of `secrets`.
 * `source` only names the source in the error.
 */
export function verifySignature(source: string, scheme: SignatureScheme, secrets: readonly string[], headers: HeaderBag, rawBody: Uint8Array, now: Date): void {
  const header = scheme.kind === 'github' ? GITHUB_SIGNATURE_HEADER : scheme.header.toLowerCase();
  const encoding = scheme.kind === 'github' ? 'hex' : (scheme.encoding ?? 'hex');
  const prefix = scheme.kind === 'github' ? 'sha256=' : (scheme.prefix ?? '');

  const sig = headerValue(headers, header);
  if (sig.kind === 'absent') throw new WebhookUnauthenticated(source, 'missing_signature', header);
  if (sig.kind === 'ambiguous') throw new WebhookUnauthenticated(source, 'malformed_signature', header);
  const text = sig.value.trim();
  if (!text.startsWith(prefix)) throw new WebhookUnauthenticated(source, 'malformed_signature', header);
  const given = decodeDigest(text.slice(prefix.length), encoding);
  if (given === null) throw new WebhookUnauthenticated(source, 'malformed_signature', header);

  const signed: Array<string | Uint8Array> = [];
  if (scheme.kind === 'hmac-sha256' && scheme.timestamp !== undefined) {
    const tsHeader = scheme.timestamp.header.toLowerCase();
    const ts = headerValue(headers, tsHeader);
    if (ts.kind === 'absent') throw new WebhookUnauthenticated(source, 'missing_timestamp', tsHeader);
    if (ts.kind === 'ambiguous' || !/^\d{1,12}$/.test(ts.value.trim())) throw new WebhookUnauthenticated(source, 'malformed_timestamp', tsHeader);
    const tsText = ts.value.trim();
    // The signature is checked BEFORE freshness, so an attacker without the secret learns
    // nothing from which of the two failed.
    signed.push(tsText, '.', rawBody);
    if (!matchesAny(given, secrets, signed)) throw new WebhookUnauthenticated(source, 'signature_mismatch', header);
    const tolerance = scheme.timestamp.toleranceSeconds ?? DEFAULT_TIMESTAMP_TOLERANCE_SECONDS;
    const skewSeconds = Math.abs(now.getTime() / 1000 - Number(tsText));
    if (skewSeconds > tolerance) throw new WebhookUnauthenticated(source, 'stale_timestamp', tsHeader);
    return;
  }
  signed.push(rawBody);
  if (!matchesAny(given, secrets, signed)) throw new WebhookUnauthenticated(source, 'signature_mismatch', header);
}

function matchesAny(given: Buffer, secrets: readonly string[], signed: ReadonlyArray<string | Uint8Array>): boolean {
  let ok = false;
  // Every secret is tried (no early exit) so timing does not reveal which one matched.
  for (const secret of secrets) {
    if (timingSafeEqual(hmac(secret, signed), given)) ok = true;
  }
  return ok;
}

/** Signs a body the way `verifySignature` expects — for tests, fixtures and sending peers. */
export function signBody(scheme: SignatureScheme, secret: string, rawBody: Uint8Array | string, timestampSeconds?: number): Record<string, string> {
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
  if (scheme.kind === 'github') return { [GITHUB_SIGNATURE_HEADER]: `sha256=${hmac(secret, [body]).toString('hex')}` };
  const encoding = scheme.encoding ?? 'hex';
  const out: Record<string, string> = {};
  let parts: Array<string | Uint8Array> = [body];
  if (scheme.timestamp !== undefined) {
    if (timestampSeconds === undefined) throw new RangeError('signBody: this scheme signs a timestamp; pass timestampSeconds');
    const ts = String(Math.floor(timestampSeconds));
    out[scheme.timestamp.header.toLowerCase()] = ts;
    parts = [ts, '.', body];
  }
  out[scheme.header.toLowerCase()] = `${scheme.prefix ?? ''}${hmac(secret, parts).toString(encoding)}`;
  return out;
}
