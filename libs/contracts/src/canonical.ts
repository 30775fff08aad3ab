/**
 * RFC 8785 (JCS) canonical JSON and the sha256 digests built on it. Payload hashes, packet
 * digests and ledger chain hashes are all computed here and nowhere else.
 */
import { hash } from 'node:crypto';
import { jcs } from './jcs.js';

export { inCanonicalOrder } from './jcs.js';

/** RFC 8785 canonical form of a JSON value. Throws on values JSON cannot carry. */
export function canonicalJson(value: unknown): string {
  const text = jcs(value);
  if (text === undefined) throw new TypeError('value has no JSON representation');
  return text;
}

/**
 * Lower-case hex sha256 of bytes or a UTF-8 string. One-shot `crypto.hash`: no Hash object per
 * digest (~1.2 against ~2.1 µs for a 300-byte input on Node 20; a turn takes several).
 */
export function sha256Hex(data: string | Uint8Array): string {
  return hash('sha256', data, 'hex');
}

/**
 * The UTF-8 bytes of `text` in a buffer of their own. `Buffer.from(text)` cuts a short string's
 * bytes out of a shared pool slab (64 KB on Node 24, 8 KB on Node 20), and one live view keeps
 * its whole slab resident: bytes kept past the turn that made them (a conversation's history
 * items, a tool request waiting on its outcome) must own their memory. Measured at 1,000 live
 * agents: ~330 slabs (16 MB) held by a few hundred bytes each.
 */
export function ownedUtf8(text: string): Buffer {
  const out = Buffer.allocUnsafeSlow(Buffer.byteLength(text, 'utf8'));
  out.write(text, 'utf8');
  return out;
}

/** `sha256:<hex>` of the canonical form: the payload hash carried by every envelope. */
export function payloadHash(payload: unknown): string {
  return `sha256:${sha256Hex(canonicalJson(payload))}`;
}
