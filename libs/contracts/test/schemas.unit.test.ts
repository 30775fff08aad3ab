import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { afterAll, describe, expect, it } from 'vitest';
import {
  CANCEL_MODES,
  GATE_STATES,
  MESSAGE_TYPES,
  MESSAGE_TYPE_NAMES,
  RUNNABLE_REASONS,
  SCHEMAS_DIR,
  SCHEMA_FILES,
  SCHEMA_ID_BASE,
  SENDER_SERVICES,
  TERMINAL_TASK_STATES,
  TRUST_LABELS,
  WHAT_LANDED,
  payloadContract,
} from '@everdict/contracts';

const REPO = dirname(SCHEMAS_DIR);
const GEN_TYPES = join(REPO, 'scripts/gen-types.mjs');
type Json = Record<string, unknown>;

const onDisk = readdirSync(SCHEMAS_DIR, { recursive: true, encoding: 'utf8' })
  .map((p) => p.split('\\').join('/'))
  .filter((p) => p.endsWith('.schema.json'))
  .sort();
const load = (file: string) => JSON.parse(readFileSync(join(SCHEMAS_DIR, file), 'utf8')) as Json;
const contractFiles = onDisk.filter((f) => f === 'message-envelope.schema.json' || f.startsWith('payloads/'));

/** Calls `visit` on every subschema with its JSON Pointer inside the schema. */
function walk(schema: unknown, visit: (s: Json, at: string) => void, at = ''): void {
  if (typeof schema !== 'object' || schema === null) return;
  const s = schema as Json;
  visit(s, at);
  for (const [key, value] of Object.entries(s)) {
    if (key === 'properties' || key === '$defs') {
      for (const [name, sub] of Object.entries(value as Json)) walk(sub, visit, `${at}/${key}/${name}`);
    } else if (['items', 'then', 'else', 'if', 'not', 'additionalProperties'].includes(key)) {
      walk(value, visit, `${at}/${key}`);
    } else if (['anyOf', 'oneOf', 'allOf'].includes(key)) {
      (value as unknown[]).forEach((sub, i) => walk(sub, visit, `${at}/${key}/${i}`));
    }
  }
}

function enumAt(file: string, ...path: string[]): unknown {
  let s: unknown = load(file);
  for (const p of path) s = (s as Json)[p];
  return (s as Json)['enum'];
}

describe('schemas/', () => {
  it('the generated file table lists exactly the schema files on disk', () => {
    expect([...SCHEMA_FILES].sort()).toEqual(onDisk);
    expect(onDisk).toContain('message-envelope.schema.json');
  });

  it.each(onDisk.map((f) => [f]))('%s compiles under strict Ajv 2020-12 and carries its $id', (file) => {
    const ajv = new Ajv2020({ allErrors: true, strict: true, allowUnionTypes: true });
    addFormatsModule.default(ajv);
    const schema = load(file);
    expect(schema['$schema']).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(schema['$id']).toBe(SCHEMA_ID_BASE + file);
    expect(typeof ajv.compile(schema)).toBe('function');
  });

  // Open objects are deliberate: the envelope's payload is checked by its own schema, and a
  // connector receipt's shape belongs to the connector.
  const OPEN_OBJECTS = new Set(['message-envelope.schema.json#/properties/payload', 'payloads/effect.outcome.v1.schema.json#/properties/receipt']);
  const UUID_PATTERN = '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';
  const FIXED_LENGTH_PATTERNS = new Set([UUID_PATTERN, '^sha256:[0-9a-f]{64}$']);
  // Entity ids are UUIDs; step ids are stable labels chosen by the planner.
  const ID_PROPERTY = /\/properties\/(?!stepId$|planStepId$)[A-Za-z]*Id$/;

  it.each(contractFiles.map((f) => [f]))('%s closes every object and bounds every string', (file) => {
    const problems: string[] = [];
    walk(load(file), (s, at) => {
      const types = ([] as unknown[]).concat(s['type'] ?? []);
      const where = `${file}#${at}`;
      if ((types.includes('object') || 'properties' in s) && !OPEN_OBJECTS.has(where) && s['additionalProperties'] !== false && !/\/(if|then|else)$/.test(at)) {
        problems.push(`${where}: additionalProperties must be false`);
      }
      if (types.includes('string') && typeof s['maxLength'] !== 'number' && !FIXED_LENGTH_PATTERNS.has(String(s['pattern']))) {
        problems.push(`${where}: string without maxLength`);
      }
      if (ID_PROPERTY.test(at) && s['pattern'] !== UUID_PATTERN) problems.push(`${where}: ids are lower-case UUIDs`);
    });
    expect(problems).toEqual([]);
  });

  it('enums agree with the constants the code and the SQL CHECKs use', () => {
    expect(enumAt('message-envelope.schema.json', 'properties', 'trust')).toEqual([...TRUST_LABELS]);
    expect(enumAt('message-envelope.schema.json', 'properties', 'sender', 'properties', 'service')).toEqual([...SENDER_SERVICES]);
    expect(enumAt('payloads/task.runnable.v1.schema.json', 'properties', 'reason')).toEqual([...RUNNABLE_REASONS]);
    expect(enumAt('payloads/effect.outcome.v1.schema.json', 'properties', 'outcome')).toEqual([...WHAT_LANDED]);
    expect(enumAt('payloads/gate.decided.v1.schema.json', 'properties', 'outcome')).toEqual(GATE_STATES.filter((s) => s !== 'open'));
    expect(enumAt('payloads/task.finished.v1.schema.json', 'properties', 'outcome')).toEqual([...TERMINAL_TASK_STATES]);
    expect(enumAt('payloads/task.cancel.v1.schema.json', 'properties', 'mode')).toEqual([...CANCEL_MODES]);
  });

  it('MESSAGE_TYPES holds one compiled validator per payload schema', () => {
    const payloadFiles = onDisk.filter((f) => f.startsWith('payloads/'));
    const registered = MESSAGE_TYPE_NAMES.flatMap((t) => Object.values(MESSAGE_TYPES[t]).map((c) => c.schemaFile));
    expect(registered.sort()).toEqual(payloadFiles);
    const contract = payloadContract('task.runnable', 1);
    expect(contract?.schemaId).toBe(`${SCHEMA_ID_BASE}payloads/task.runnable.v1.schema.json`);
    expect(contract?.validate({ taskId: '01900000-0000-7000-8000-000000000001', reason: 'woken' })).toBe(true);
    expect(contract?.validate({ taskId: '01900000-0000-7000-8000-000000000001', reason: 'woken', extra: 1 })).toBe(false);
    expect(payloadContract('task.runnable', 2)).toBeUndefined();
    expect(payloadContract('toString', 1)).toBeUndefined();
  });
});

describe('scripts/gen-types.mjs', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'everdict-gen-types-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  const run = (...args: string[]) => spawnSync(process.execPath, [GEN_TYPES, ...args], { encoding: 'utf8' });

  it('--check passes on the committed generated types', () => {
    expect(() => execFileSync(process.execPath, [GEN_TYPES, '--check'], { encoding: 'utf8', stdio: 'pipe' })).not.toThrow();
  });

  it('--check exits 1 naming a stale, a missing and an orphaned file', () => {
    const schemas = join(scratch, 'schemas');
    const out = join(scratch, 'generated');
    cpSync(SCHEMAS_DIR, schemas, { recursive: true });
    expect(run('--schemas', schemas, '--out', out).status).toBe(0);
    expect(run('--check', '--schemas', schemas, '--out', out).status).toBe(0);

    const cancel = join(schemas, 'payloads/task.cancel.v1.schema.json');
    const schema = JSON.parse(readFileSync(cancel, 'utf8')) as Json;
    (schema['properties'] as Json)['reason'] = { type: 'string', maxLength: 10, description: 'changed' };
    writeFileSync(cancel, JSON.stringify(schema));
    rmSync(join(out, 'payloads/task.runnable.v1.ts'));
    writeFileSync(join(out, 'leftover.ts'), 'export type Leftover = 1;\n');

    const check = run('--check', '--schemas', schemas, '--out', out);
    expect(check.status).toBe(1);
    expect(check.stderr).toContain('payloads/task.cancel.v1.ts (stale)');
    expect(check.stderr).toContain('payloads/task.runnable.v1.ts (missing)');
    expect(check.stderr).toContain('leftover.ts (orphan');

    // Regenerating repairs all three.
    expect(run('--schemas', schemas, '--out', out).status).toBe(0);
    expect(run('--check', '--schemas', schemas, '--out', out).status).toBe(0);
  });

  it('picks up a new schema automatically and refuses a payload schema with a bad name', () => {
    const schemas = join(scratch, 'schemas2');
    const out = join(scratch, 'generated2');
    cpSync(SCHEMAS_DIR, schemas, { recursive: true });
    writeFileSync(
      join(schemas, 'fleet-config.schema.json'),
      JSON.stringify({ $schema: 'https://json-schema.org/draft/2020-12/schema', $id: `${SCHEMA_ID_BASE}fleet-config.schema.json`, title: 'FleetConfig', type: 'object', additionalProperties: false, properties: { name: { type: 'string', maxLength: 10 } } }),
    );
    expect(run('--schemas', schemas, '--out', out).status).toBe(0);
    expect(readFileSync(join(out, 'fleet-config.ts'), 'utf8')).toContain('export interface FleetConfig');
    expect(readFileSync(join(out, 'index.ts'), 'utf8')).toContain('"fleet-config.schema.json"');

    writeFileSync(join(schemas, 'payloads/Bad-Name.schema.json'), JSON.stringify({ $id: `${SCHEMA_ID_BASE}payloads/Bad-Name.schema.json`, title: 'Bad', type: 'object' }));
    const bad = run('--check', '--schemas', schemas, '--out', out);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('payloads/<type>.v<N>.schema.json');
  });
});
