/**
 * How tests and benchmarks start an Everdict process: always through `everdict start`, the one
 * composition root compose runs — never a service composed by hand. From the sources (tsx, the
 * `source` export condition), so a test exercises the code under test without a build.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { eventually } from './index.js';
import { readinessBudgetMs } from './readiness.js';

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

export interface EverdictNode {
  readonly child: ChildProcess;
  readonly url: string;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
  /** SIGTERM, then resolves once the process has exited; a second call waits for the same exit. */
  stop(): Promise<void>;
}

export interface EverdictNodeOptions {
  /** The services to run; none: every service, as `everdict start` without `--service`. */
  readonly services: readonly string[];
  /** The HTTP port (PORT); the node is ready when its `/readyz` there answers 200. */
  readonly port: number;
  /** Over this process's environment (DATABASE_URL, EVERDICT_CONFIG …); LOG_LEVEL defaults to `warn`. */
  readonly env: Readonly<Record<string, string>>;
  /** The readiness budget's base (readinessBudgetMs), default 30 s. */
  readonly readyBaseMs?: number;
  /** How often `/readyz` is asked, default 50 ms. */
  readonly readyIntervalMs?: number;
}

/**
 * `everdict start` from source, output captured; resolves once the node is ready. A node not
 * ready within the readiness budget is killed (SIGKILL) and the error carries its last output.
 */
export async function startEverdictNode(o: EverdictNodeOptions): Promise<EverdictNode> {
  const url = `http://127.0.0.1:${o.port}`;
  let output = '';
  const child = spawn(process.execPath, everdictStartArgs(o.services), {
    cwd: repoRoot(),
    env: { ...process.env, LOG_LEVEL: 'warn', ...o.env, PORT: String(o.port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (b: Buffer) => (output += b.toString('utf8')));
  child.stderr!.on('data', (b: Buffer) => (output += b.toString('utf8')));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    })();
    return stopped;
  };
  const what = `everdict start ${o.services.length ? o.services.join(' ') : '(every service)'} ready`;
  await eventually(async () => (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200, { timeoutMs: readinessBudgetMs(o.readyBaseMs), intervalMs: o.readyIntervalMs ?? 50, what }).catch((err: unknown) => {
    child.kill('SIGKILL');
    throw new Error(`${String(err)}\n${output.slice(-3000)}`);
  });
  return { child, url, output: () => output, stop };
}
