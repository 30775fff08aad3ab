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

/** `sha256:<hex>` of the canonical form: the payload hash carried by every envelope. */
export function payloadHash(payload: unknown): string {
  return `sha256:${sha256Hex(canonicalJson(payload))}`;
}
