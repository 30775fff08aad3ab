/**
 * The JSON Schemas of schemas/ compiled once, at module load, by one Ajv instance (JSON Schema
 * 2020-12, ajv-formats, allErrors, strict). Which files exist comes from the generated file
 * table, so the compiled validators and the generated TypeScript types always describe the same
 * schema set (`gen-types --check` fails otherwise).
 *
 * Schemas are read from the repository's schemas/ folder, located relative to this module so
 * the same code works from src/ (tests, tsx) and from dist/src/ (compiled).
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { AnySchemaObject, ErrorObject, ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { EverdictError } from './errors.js';
import { ENVELOPE_SCHEMA_FILE, SCHEMA_FILES } from './generated/index.js';

/** Every schema's `$id` is this prefix + its path relative to schemas/. */
export const SCHEMA_ID_BASE = 'https://everdict.dev/schemas/';

type SchemaFile = (typeof SCHEMA_FILES)[number];

function locateSchemasDir(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  // libs/contracts/src → repo root is 3 levels up; libs/contracts/dist/src → 4 levels up.
  const candidates = [resolve(here, '../../../schemas'), resolve(here, '../../../../schemas')];
  const found = candidates.find((dir) => existsSync(join(dir, ENVELOPE_SCHEMA_FILE)));
  if (found === undefined) {
    throw new EverdictError('schemas_not_found', `schemas/${ENVELOPE_SCHEMA_FILE} not found near ${here}`, { details: { candidates } });
  }
  return found;
}

/** Absolute path of the schemas/ folder the validators were compiled from. */
export const SCHEMAS_DIR = locateSchemasDir();

function createAjv(): Ajv2020 {
  // allowUnionTypes: nullable ids are written `"type": ["string", "null"]`, which strict mode
  // otherwise refuses. Everything else stays strict: an unknown keyword is a schema bug.
  const ajv = new Ajv2020({ allErrors: true, strict: true, allowUnionTypes: true });
  addFormatsModule.default(ajv);
  return ajv;
}

function loadSchema(file: SchemaFile): AnySchemaObject {
  const schema = JSON.parse(readFileSync(join(SCHEMAS_DIR, file), 'utf8')) as AnySchemaObject;
  if (schema.$id !== SCHEMA_ID_BASE + file) {
    throw new EverdictError('invalid_schema', `schemas/${file}: $id must be ${SCHEMA_ID_BASE + file}`);
  }
  return schema;
}

function compileAll(): ReadonlyMap<SchemaFile, ValidateFunction> {
  const ajv = createAjv();
  // Add every schema before compiling any, so a `$ref` across files resolves by `$id`.
  for (const file of SCHEMA_FILES) ajv.addSchema(loadSchema(file));
  const validators = new Map<SchemaFile, ValidateFunction>();
  for (const file of SCHEMA_FILES) {
    const validate = ajv.getSchema(SCHEMA_ID_BASE + file);
    if (validate === undefined) throw new EverdictError('invalid_schema', `schemas/${file} did not compile`);
    validators.set(file, validate);
  }
  return validators;
}

const VALIDATORS = compileAll();

/** The compiled validator of one schema file (path relative to schemas/). */
export function schemaValidator(file: SchemaFile): ValidateFunction {
  const validate = VALIDATORS.get(file);
  if (validate === undefined) throw new EverdictError('unknown_schema', `no compiled schema for ${file}`);
  return validate;
}

/** One failed schema rule: a JSON Pointer to the offending field and what is wrong with it. */
export interface SchemaViolation {
  readonly path: string;
  readonly message: string;
}

// Property names come from the input. They are echoed only when they look like identifiers;
// anything else might be content smuggled into a key and is never copied into logs.
const SAFE_PROPERTY = /^[A-Za-z0-9_$.-]{1,64}$/;
const safeProperty = (name: unknown): string => (typeof name === 'string' && SAFE_PROPERTY.test(name) ? name : '<unprintable property>');

/**
 * Turns Ajv errors into violations with field paths under `prefix` (e.g. "/payload"). Messages
 * name the rule (pattern, format, enum values from the schema), never the offending value.
 */
export function schemaViolations(errors: readonly ErrorObject[] | null | undefined, prefix = ''): SchemaViolation[] {
  const out: SchemaViolation[] = [];
  for (const e of errors ?? []) {
    // `if` only reports that its `then` branch failed; the branch's own error is listed as well.
    if (e.keyword === 'if') continue;
    const at = prefix + e.instancePath;
    switch (e.keyword) {
      case 'required':
        out.push({ path: `${at}/${safeProperty(e.params['missingProperty'])}`, message: 'is required' });
        break;
      case 'additionalProperties':
        out.push({ path: `${at}/${safeProperty(e.params['additionalProperty'])}`, message: 'is not allowed' });
        break;
      case 'enum':
        out.push({ path: at || '/', message: `must be one of ${JSON.stringify(e.params['allowedValues'])}` });
        break;
      default:
        out.push({ path: at || '/', message: e.message ?? `fails ${e.keyword}` });
    }
  }
  return out;
}

/** A one-line summary of violations for error messages and dead-letter records. */
export function describeViolations(violations: readonly SchemaViolation[], max = 5): string {
  const shown = violations.slice(0, max).map((v) => `${v.path} ${v.message}`);
  const more = violations.length > max ? `; and ${violations.length - max} more` : '';
  return shown.join('; ') + more;
}
