/**
 * Declared parameters of a registered operation and the pure check of bound values against
 * them. Binding is exact: every declared parameter is required, nothing undeclared is accepted,
 * and values are never coerced (the string "5" is not the integer 5).
 */
import { PARAM_TYPES } from '@everdict/contracts';
import type { EffectParams, ParamSpec, SchemaViolation } from '@everdict/contracts';

export { PARAM_TYPES } from '@everdict/contracts';
export type { ParamSpec, ParamType } from '@everdict/contracts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const PARAM_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const DEFAULT_MAX_LENGTH = 10_000;

/** Problems with a parameter declaration itself (config review, at connector construction). */
export function paramSpecProblems(name: string, spec: ParamSpec): string[] {
  const problems: string[] = [];
  if (!PARAM_NAME.test(name)) problems.push(`parameter name ${JSON.stringify(name)} is not an identifier`);
  if (!(PARAM_TYPES as readonly string[]).includes(spec.type)) problems.push(`parameter ${name}: unknown type`);
  if (spec.pattern !== undefined) {
    try {
      new RegExp(spec.pattern, 'u');
    } catch {
      problems.push(`parameter ${name}: pattern is not a valid regular expression`);
    }
  }
  return problems;
}

/**
 * Violations of `params` against `specs`, with paths under `at` (e.g. "/params"). Messages name
 * the rule, never the value.
 */
export function paramViolations(specs: Readonly<Record<string, ParamSpec>>, params: EffectParams, at: string): SchemaViolation[] {
  const out: SchemaViolation[] = [];
  for (const name of Object.keys(params)) {
    if (!Object.hasOwn(specs, name)) out.push({ path: `${at}/${PARAM_NAME.test(name) ? name : '<unprintable>'}`, message: 'is not a declared parameter' });
  }
  for (const [name, spec] of Object.entries(specs)) {
    const path = `${at}/${name}`;
    const value = Object.hasOwn(params, name) ? params[name] : undefined;
    if (value === undefined) {
      out.push({ path, message: 'is required' });
      continue;
    }
    const problem = valueProblem(spec, value);
    if (problem !== undefined) out.push({ path, message: problem });
  }
  return out;
}

function valueProblem(spec: ParamSpec, value: string | number | boolean): string | undefined {
  switch (spec.type) {
    case 'boolean':
      return typeof value === 'boolean' ? undefined : 'must be a boolean';
    case 'integer':
      if (typeof value !== 'number' || !Number.isSafeInteger(value)) return 'must be a safe integer';
      return rangeProblem(spec, value);
    case 'number':
      if (typeof value !== 'number' || !Number.isFinite(value)) return 'must be a finite number';
      return rangeProblem(spec, value);
    case 'uuid':
      return typeof value === 'string' && UUID.test(value) ? undefined : 'must be a lower-case UUID';
    case 'string': {
      if (typeof value !== 'string') return 'must be a string';
      const max = spec.maxLength ?? DEFAULT_MAX_LENGTH;
      if (value.length > max) return `must be at most ${max} characters`;
      if (spec.minLength !== undefined && value.length < spec.minLength) return `must be at least ${spec.minLength} characters`;
      if (spec.pattern !== undefined && !new RegExp(`^(?:${spec.pattern})$`, 'u').test(value)) return `must match ${spec.pattern}`;
      if (spec.enum !== undefined && !spec.enum.includes(value)) return `must be one of ${JSON.stringify(spec.enum)}`;
      return undefined;
    }
  }
}

function rangeProblem(spec: ParamSpec, value: number): string | undefined {
  if (spec.minimum !== undefined && value < spec.minimum) return `must be >= ${spec.minimum}`;
  if (spec.maximum !== undefined && value > spec.maximum) return `must be <= ${spec.maximum}`;
  return undefined;
}
