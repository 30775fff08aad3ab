/**
 * Runs `node bin/everdict.js start …` — the compiled CLI, exactly what `npm start` runs after its
 * `tsc -b` — as a real child process. `npm test` builds before vitest runs; when running a file
 * alone, run `npx tsc -b` first (a missing build fails loudly here, a stale one runs old code).
 *
 * The child's environment is this process's minus every Everdict variable, plus `env`: a test
 * states the mode it wants instead of inheriting DATABASE_URL or AMQP_URL by accident.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { eventually, readinessBudgetMs, freePort } from '@everdict/testkit';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = join(REPO, 'bin', 'everdict.js');
const BUILT = join(REPO, 'cli', 'dist', 'src', 'main.js');

const STRIPPED = ['DATABASE_URL', 'AMQP_URL', 'PORT', 'LOG_LEVEL'];


export interface EverdictNode {
  readonly child: ChildProcess;
  readonly url: string;
  readonly exited: Promise<number | null>;
  /** Everything written to stdout and stderr so far. */
  output(): string;
  /** The JSON log lines so far, parsed. */
  logs(): Record<string, unknown>[];
  /** Sends `signal` and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export async function startEverdict(o: { args?: string[]; env: Record<string, string>; readyTimeoutMs?: number }): Promise<EverdictNode> {
  if (!existsSync(BUILT)) throw new Error(`${BUILT} is missing: build first (npx tsc -b); npm test does`);
  const port = await freePort();
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('EVERDICT_') && !STRIPPED.includes(k)) env[k] = v;
  Object.assign(env, { PORT: String(port), LOG_LEVEL: 'info' }, o.env);
  const child = spawn(process.execPath, [BIN, 'start', ...(o.args ?? [])], { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString('utf8')));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString('utf8')));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  const url = `http://127.0.0.1:${port}`;
  const node: EverdictNode = {
    child,
    url,
    exited,
    output: () => out,
    logs: () =>
      out.split('\n').flatMap((l) => {
        if (!l.startsWith('{')) return [];
        try {
          return [JSON.parse(l) as Record<string, unknown>];
        } catch {
          return [];
        }
      }),
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
  try {
    await Promise.race([
      eventually(async () => (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200, {
        timeoutMs: o.readyTimeoutMs ?? readinessBudgetMs(60_000),
        intervalMs: 100,
        what: `everdict start ${(o.args ?? []).join(' ')} ready on ${url}`,
      }),
      exited.then((code) => {
        throw new Error(`everdict start exited with ${code} before it was ready`);
      }),
    ]);
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${(err as Error).message}\n--- output ---\n${out}`, { cause: err });
  }
  return node;
}

export interface Reply {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

export async function call(base: string, method: string, path: string, token?: string, body?: unknown): Promise<Reply> {
  const headers: Record<string, string> = {};
  if (token) headers['authorization'] = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${base}${path}`, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  const text = await res.text();
  return { status: res.status, body: text.length ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

export { freePort };
