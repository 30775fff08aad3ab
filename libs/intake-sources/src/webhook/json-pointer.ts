/**
 * JSON Pointer (RFC 6901), the generic mapping's way of naming a field. Pure.
 */
import { EverdictError } from '@everdict/contracts';

/** Splits a pointer into reference tokens; throws `invalid_config` for a malformed one. */
export function parsePointer(pointer: string, path = 'pointer'): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw new EverdictError('invalid_config', `${path} must be a JSON pointer starting with "/" (got ${JSON.stringify(pointer)})`, { details: { path } });
  return pointer
    .slice(1)
    .split('/')
    .map((token) => {
      if (/~(?![01])/.test(token)) throw new EverdictError('invalid_config', `${path} has an invalid escape in ${JSON.stringify(token)}`, { details: { path } });
      // Order matters (RFC 6901 §4): ~1 first, then ~0, so "~01" decodes to "~1".
      return token.replace(/~1/g, '/').replace(/~0/g, '~');
    });
}

/** The value at `pointer` in `doc`, or undefined when any step is missing. */
export function resolvePointer(doc: unknown, pointer: string): unknown {
  let at: unknown = doc;
  for (const token of parsePointer(pointer)) {
    if (Array.isArray(at)) {
      if (!/^(0|[1-9][0-9]*)$/.test(token)) return undefined;
      at = at[Number(token)];
    } else if (at !== null && typeof at === 'object') {
      if (!Object.prototype.hasOwnProperty.call(at, token)) return undefined;
      at = (at as Record<string, unknown>)[token];
    } else {
      return undefined;
    }
  }
  return at;
}
