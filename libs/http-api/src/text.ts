/**
 * Text that Postgres cannot store, found before it reaches the store: a NUL character (text
 * and jsonb reject U+0000) or a lone UTF-16 surrogate (jsonb rejects it; text would silently
 * turn it into U+FFFD). A request carrying either is refused with 400 naming the field; text
 * from a source that cannot be refused (a mail body) is made storable with `storableText`.
 * Pure.
 */

export type BadTextProblem = 'nul' | 'lone_surrogate';

export interface BadText {
  /** Dotted path of the field (`title`, `answers.0.text`); a key itself is named by its path. */
  readonly field: string;
  readonly problem: BadTextProblem;
}

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

/** What is wrong with one string, if anything. */
export function textProblem(s: string): BadTextProblem | undefined {
  if (s.includes('\u0000')) return 'nul';
  if (LONE_SURROGATE.test(s)) return 'lone_surrogate';
  return undefined;
}

/** Deepest nesting walked; deeper values are refused by the schemas that read them anyway. */
const MAX_DEPTH = 64;

/** The first string (value or key) in a parsed JSON value that Postgres cannot store. */
export function findBadText(value: unknown, path = ''): BadText | undefined {
  return walk(value, path, 0);
}

function walk(value: unknown, path: string, depth: number): BadText | undefined {
  if (typeof value === 'string') {
    const problem = textProblem(value);
    return problem ? { field: path || 'body', problem } : undefined;
  }
  if (depth >= MAX_DEPTH || typeof value !== 'object' || value === null) return undefined;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = walk(value[i], join(path, String(i)), depth + 1);
      if (found) return found;
    }
    return undefined;
  }
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    const keyProblem = textProblem(key);
    // The key cannot be echoed as it is; it is named by its parent and a marker.
    if (keyProblem) return { field: join(path, '(key)'), problem: keyProblem };
    const found = walk(v, join(path, key), depth + 1);
    if (found) return found;
  }
  return undefined;
}

function join(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

/** NULs and lone surrogates replaced by U+FFFD, everything else unchanged. */
export function storableText(s: string): string {
  return s.replaceAll('\u0000', '\ufffd').replace(LONE_SURROGATES, '\ufffd');
}

export function describeBadText(b: BadText): string {
  return b.problem === 'nul' ? `${b.field} contains a NUL character` : `${b.field} contains a lone UTF-16 surrogate`;
}
