/**
 * Package boundaries (DESIGN §1): services compose libs; no service imports another service and
 * no lib imports a service. Only cli/, the composition root, imports services and nothing imports
 * cli/; test/ and bench/ are cross-service suites outside the rule.
 *
 * Every import, export-from and dynamic import of every source, test and bench file under libs/
 * and services/ is resolved to the workspace package it reaches: a relative specifier by the
 * directory it lands in, a bare one by package name. The lint rule in eslint.config.js refuses the
 * same imports by their spelling; this test is the one that cannot be fooled by a path's shape.
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const SOURCE = /\.(?:[cm]?ts|tsx|[cm]?js)$/;
const SKIP = new Set(['node_modules', 'dist', 'generated']);

type Kind = 'lib' | 'service' | 'cli';
interface Workspace {
  readonly dir: string;
  readonly name: string;
  readonly kind: Kind;
}

function workspaces(): Workspace[] {
  const found: Workspace[] = [];
  const add = (dir: string, kind: Kind) => {
    const manifest = join(ROOT, dir, 'package.json');
    if (existsSync(manifest)) found.push({ dir, kind, name: (JSON.parse(readFileSync(manifest, 'utf8')) as { name: string }).name });
  };
  for (const [group, kind] of [['libs', 'lib'], ['services', 'service']] as const) {
    for (const name of readdirSync(join(ROOT, group))) add(`${group}/${name}`, kind);
  }
  add('cli', 'cli');
  return found;
}

const WORKSPACES = workspaces();

/** The workspace holding a repository-relative path, if any. */
function ownerOf(path: string): Workspace | undefined {
  return WORKSPACES.find((w) => path === w.dir || path.startsWith(`${w.dir}/`));
}

/** The workspace a specifier written in `file` (repository-relative) reaches, if any. */
function target(file: string, specifier: string): Workspace | undefined {
  if (specifier.startsWith('.')) return ownerOf(relative(ROOT, resolve(ROOT, dirname(file), specifier)).split(sep).join('/'));
  return WORKSPACES.find((w) => specifier === w.name || specifier.startsWith(`${w.name}/`));
}

/** Every boundary the file crosses, as "file: specifier (reason)". */
function boundaryViolations(file: string, text: string): string[] {
  const from = ownerOf(file);
  if (!from || from.kind === 'cli') return [];
  const out: string[] = [];
  for (const { fileName: specifier } of ts.preProcessFile(text, true, true).importedFiles) {
    const to = target(file, specifier);
    if (!to || to === from || to.kind === 'lib') continue;
    const what = to.kind === 'cli' ? 'the CLI' : `service ${to.dir}`;
    out.push(`${file}: ${specifier} (${from.kind === 'lib' ? 'lib' : 'service'} ${from.dir} imports ${what})`);
  }
  return out;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((name) => {
    if (SKIP.has(name) || name.startsWith('.')) return [];
    const path = `${dir}/${name}`;
    if (statSync(join(ROOT, path)).isDirectory()) return sourceFiles(path);
    return SOURCE.test(name) && !name.endsWith('.d.ts') ? [path] : [];
  });
}

describe('package boundaries', () => {
  it('resolves what crosses a boundary and what does not', () => {
    const imports = (file: string, ...specifiers: string[]) => boundaryViolations(file, specifiers.map((s) => `import '${s}';`).join('\n'));
    expect(imports('services/reconciler/src/x.ts', '../../execution-coordinator/src/connectorSet.js')).toHaveLength(1);
    expect(imports('services/intake/test/x.ts', '@everdict/gate', '@everdict/gate/sub', '../../../cli/src/start.js')).toHaveLength(3);
    expect(boundaryViolations('services/intake/src/x.ts', "const m = await import('@everdict/turn-worker');\nexport { y } from '../../gate/src/index.js';")).toHaveLength(2);
    expect(imports('libs/store/src/x.ts', '@everdict/reconciler', '../../../services/gate/src/api.js', '@everdict/cli')).toHaveLength(3);
    expect(imports('services/intake/test/x.ts', '@everdict/intake', '../src/api.js', '@everdict/http-api', '../../../libs/store/src/index.js', 'node:http', 'vitest')).toEqual([]);
    expect(imports('libs/connectors/src/x.ts', '@everdict/contracts', './http/config.js')).toEqual([]);
    expect(imports('cli/src/x.ts', '@everdict/gate', '../../services/intake/src/index.js')).toEqual([]);
  });

  it('no service imports another service and no lib imports a service', () => {
    const scanned = WORKSPACES.filter((w) => w.kind !== 'cli').map((w) => ({ w, files: sourceFiles(w.dir) }));
    for (const kind of ['lib', 'service'] as const) expect(scanned.some(({ w, files }) => w.kind === kind && files.length > 0)).toBe(true);
    const violations = scanned.flatMap(({ files }) => files.flatMap((file) => boundaryViolations(file, readFileSync(join(ROOT, file), 'utf8'))));
    expect(violations).toEqual([]);
  });
});
