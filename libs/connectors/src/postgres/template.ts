/**
 * Compiling reviewed SQL templates (pure). `:name` placeholders become `$n::type` bind
 * parameters; string literals, quoted identifiers, comments and dollar-quoted bodies are skipped
 * so a `:` inside them is never mistaken for a placeholder. One statement per template.
 */
import type { EffectParams } from '@everdict/contracts';
import type { ParamType } from '../params.js';

/** The Postgres type each declared parameter type is cast to. */
const PG_CASTS: Readonly<Record<ParamType, string>> = {
  string: 'text',
  integer: 'int8',
  number: 'numeric',
  boolean: 'bool',
  uuid: 'uuid',
};

export interface CompiledTemplate {
  readonly text: string;
  /** Parameter name of $1, $2, … */
  readonly order: readonly string[];
}

export class TemplateError extends Error {}

const IDENT_START = /[A-Za-z_]/;
const IDENT_PART = /[A-Za-z0-9_]/;

/**
 * @throws TemplateError for an unterminated literal, a positional `$n`, a second statement, or a
 *   placeholder whose type is unknown (`types` has no entry for it).
 */
export function compileTemplate(sql: string, types: Readonly<Record<string, ParamType>>): CompiledTemplate {
  const order: string[] = [];
  let out = '';
  let i = 0;
  const n = sql.length;

  const skipTo = (end: string, from: number, what: string): number => {
    const at = sql.indexOf(end, from);
    if (at < 0) throw new TemplateError(`unterminated ${what}`);
    return at + end.length;
  };

  while (i < n) {
    const c = sql[i] ?? '';
    const next = sql[i + 1] ?? '';
    let j: number;
    if (c === "'") {
      // E'…' strings allow backslash escapes; standard strings only double the quote.
      const escapes = i > 0 && /[Ee]/.test(sql[i - 1] ?? '') && !IDENT_PART.test(sql[i - 2] ?? '');
      j = i + 1;
      for (;;) {
        if (j >= n) throw new TemplateError('unterminated string literal');
        if (escapes && sql[j] === '\\') j += 2;
        else if (sql[j] === "'" && sql[j + 1] === "'") j += 2;
        else if (sql[j] === "'") break;
        else j++;
      }
      j++;
    } else if (c === '"') {
      j = i + 1;
      for (;;) {
        if (j >= n) throw new TemplateError('unterminated quoted identifier');
        if (sql[j] === '"' && sql[j + 1] === '"') j += 2;
        else if (sql[j] === '"') break;
        else j++;
      }
      j++;
    } else if (c === '-' && next === '-') {
      const nl = sql.indexOf('\n', i);
      j = nl < 0 ? n : nl;
    } else if (c === '/' && next === '*') {
      j = skipTo('*/', i + 2, 'block comment');
    } else if (c === '$') {
      const tag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i));
      if (tag !== null) j = skipTo(tag[0], i + tag[0].length, 'dollar-quoted string');
      else if (/[0-9]/.test(next)) throw new TemplateError('positional parameters ($1) are not allowed; use :name');
      else j = i + 1;
    } else if (c === ':' && next === ':') {
      j = i + 2;
    } else if (c === ':' && IDENT_START.test(next) && !IDENT_PART.test(sql[i - 1] ?? ' ')) {
      j = i + 1;
      while (j < n && IDENT_PART.test(sql[j] ?? '')) j++;
      const name = sql.slice(i + 1, j);
      const type = types[name];
      if (type === undefined) throw new TemplateError(`placeholder :${name} is not a declared parameter`);
      let index = order.indexOf(name);
      if (index < 0) index = order.push(name) - 1;
      out += `$${index + 1}::${PG_CASTS[type]}`;
      i = j;
      continue;
    } else if (c === ';') {
      if (sql.slice(i + 1).trim() !== '') throw new TemplateError('a template is one statement');
      break;
    } else {
      j = i + 1;
    }
    out += sql.slice(i, j);
    i = j;
  }
  return { text: out.trim(), order };
}

/** Bind values in placeholder order. Values were checked against their specs at admission. */
export function bindTemplate(compiled: CompiledTemplate, params: EffectParams): { text: string; values: unknown[] } {
  return { text: compiled.text, values: compiled.order.map((name) => params[name]) };
}
