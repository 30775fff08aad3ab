/**
 * How tests and benchmarks start an Everdict process: always through `everdict start`, the one
 * composition root compose runs — never a service composed by hand. From the sources (tsx, the
 * `source` export condition), so a test exercises the code under test without a build.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function repoRoot(): string {
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'cli', 'src', 'main.ts'))) return dir;
    if (dirname(dir) === dir) throw new Error('cli/src/main.ts not found above libs/testkit');
  }
}

/** The node arguments of `everdict start --service S…` run from source (spawn with process.execPath). */
export function everdictStartArgs(services: readonly string[]): string[] {
  return ['--conditions=source', '--import', 'tsx', join(repoRoot(), 'cli', 'src', 'main.ts'), 'start', ...services.flatMap((s) => ['--service', s])];
}
