/**
 * Query parameters read as bounded integers. A value that is not a plain decimal integer in
 * range (`after=99999999999999999999`, `limit=1e3`, `after=-1`) is refused with 400
 * `invalid_query` naming the parameter, before it can reach SQL as an out-of-range bigint.
 */
import { RequestError } from './json.js';
import { describeBadText, textProblem } from './text.js';

interface IntegerParam {
  readonly min: number;
  /** At most Number.MAX_SAFE_INTEGER (the default). */
  readonly max?: number;
  /** Used when the parameter is absent; without it the parameter is required. */
  readonly default?: number;
}

const DECIMAL = /^-?\d{1,16}$/;

export function integerParam(params: URLSearchParams, name: string, spec: IntegerParam): number {
  const max = Math.min(spec.max ?? Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
  const text = params.get(name);
  const range = `an integer from ${spec.min} to ${max}`;
  if (text === null) {
    if (spec.default !== undefined) return spec.default;
    throw new RequestError(400, 'invalid_query', `${name} is required (${range})`, name);
  }
  const n = DECIMAL.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < spec.min || n > max) throw new RequestError(400, 'invalid_query', `${name} must be ${range}`, name);
  return n;
}

/** Refuses (400 `invalid_text`, naming the parameter) a query parameter Postgres cannot store. */
export function refuseBadQueryText(params: URLSearchParams): void {
  for (const [name, value] of params) {
    const problem = textProblem(value) ?? textProblem(name);
    if (problem) {
      const field = textProblem(name) ? '(query parameter name)' : name;
      throw new RequestError(400, 'invalid_text', describeBadText({ field, problem }), field);
    }
  }
}
