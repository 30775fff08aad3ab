/**
 * The image's file tree, assembled exactly as infra/Dockerfile's build stage assembles it, must
 * run every service. The build context (the repository's files that git knows — tracked, or new
 * and not ignored — minus .dockerignore) is copied to a scratch folder, then the build stage's
 * steps run there: `npm ci`, `npm run build`, `npm prune --omit=dev`, `sh infra/assemble-image.sh
 * OUT`. From OUT, each of the five services starts as its compose container does (`node
 * bin/everdict.js start --service NAME`, the image's environment: NODE_ENV=production and the
 * Everdict variables only) against a fresh database and its own broker prefix, answers
 * /readyz 200, and exits 0 on SIGTERM. The image's default command with no variables at all
 * exits non-zero with a message naming the variables, not a stack trace.
 *
 * A file the runtime reads but the assembly leaves out (rabbitmq/definitions.json, the sample
 * config, a migration) fails here, not in a crash-looping container. Slow (npm ci and a full
 * build, several minutes on a small machine); it fails, never skips, when git, npm, Postgres or
 * RabbitMQ is missing. On failure the scratch folder is kept and named in the error.
 */
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import amqplib from 'amqplib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { deleteTopology, loadTopology } from '@everdict/bus';
import { TEST_AMQP_URL, amqpPrefix, freshDatabase, freePort } from '@everdict/testkit';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SERVICES = ['intake', 'turn-worker', 'gate', 'execution-coordinator', 'reconciler'] as const;
const BUILD_TIMEOUT_MS = 30 * 60_000;

/** Runs a command to completion; rejects with its output's tail when it fails. */
function run(cmd: string, args: string[], opts: { cwd: string; env?: NodeJS.ProcessEnv }): Promise<string> {
  return new Promise((done, fail) => {
    const child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    child.once('error', (err) => fail(new Error(`${cmd} ${args.join(' ')}: ${err.message}`)));
    child.once('exit', (code, signal) => {
      if (code === 0) done(out);
      else fail(new Error(`${cmd} ${args.join(' ')} (in ${opts.cwd}) exited ${code ?? signal}:\n${out.slice(-6000)}`));
    });
  });
}

/** .dockerignore as Docker reads it: `**` any folders, `*` within one, `!` re-includes; a match on a folder covers its contents. */
function dockerIgnore(text: string): (path: string) => boolean {
  const rules = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const negate = l.startsWith('!');
      const pattern = (negate ? l.slice(1) : l).replace(/^\/+|\/+$/g, '');
      const body = pattern
        .split('**/')
        .map((part) => part.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]'))
        .join('(?:.*/)?');
      return { negate, re: new RegExp(`^${body}(?:/.*)?$`) };
    });
  return (path) => rules.reduce((ignored, r) => (r.re.test(path) ? !r.negate : ignored), false);
}

/** The build context `COPY . .` sees, copied to `dest`. */
function copyBuildContext(dest: string): number {
  const listed = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: REPO, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (listed.status !== 0) throw new Error(`git ls-files failed (${listed.error?.message ?? listed.stderr})`);
  const ignorePath = join(REPO, '.dockerignore');
  const ignored = existsSync(ignorePath) ? dockerIgnore(readFileSync(ignorePath, 'utf8')) : () => false;
  let copied = 0;
  for (const rel of new Set(listed.stdout.split('\0').filter(Boolean))) {
    const from = join(REPO, rel);
    if (ignored(rel) || !existsSync(from)) continue; // a tracked file deleted in the working tree is not in the context
    const to = join(dest, rel);
    mkdirSync(dirname(to), { recursive: true });
    if (lstatSync(from).isSymbolicLink()) symlinkSync(readlinkSync(from), to);
    else copyFileSync(from, to);
    copied++;
  }
  return copied;
}


/** The environment of a container: the image's own variables and the given ones, nothing inherited. */
function imageEnv(vars: Record<string, string>): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', HOME: process.env.HOME ?? tmpdir(), NODE_ENV: 'production', ...vars };
}

interface Proc {
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal: NodeJS.Signals): void;
}

function startFromTree(out: string, args: string[], env: NodeJS.ProcessEnv): Proc {
  const child = spawn(process.execPath, ['bin/everdict.js', ...args], { cwd: out, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  child.stdout.on('data', (b: Buffer) => (text += b.toString()));
  child.stderr.on('data', (b: Buffer) => (text += b.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once('exit', (code, signal) => r({ code, signal })));
  return { output: () => text, exited, kill: (s) => void child.kill(s) };
}

/** Polls /readyz until 200; fails at once if the process exits first. */
async function ready(name: string, port: number, proc: Proc, timeoutMs = 90_000): Promise<void> {
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  void proc.exited.then((e) => (exit = e));
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (exit) throw new Error(`${name} exited (${exit.code ?? exit.signal}) before it was ready:\n${proc.output().slice(-4000)}`);
    const r = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null);
    if (r?.status === 200) return;
    if (Date.now() > deadline) throw new Error(`${name}: /readyz not 200 after ${timeoutMs} ms (last ${r?.status ?? 'no answer'}):\n${proc.output().slice(-4000)}`);
    await new Promise((res) => setTimeout(res, 250));
  }
}

/** The image's ENTRYPOINT + CMD arguments after `node` (exec form), read from the Dockerfile. */
function imageDefaultArgs(): string[] {
  const dockerfile = readFileSync(join(REPO, 'infra', 'Dockerfile'), 'utf8');
  const last = (op: string) => JSON.parse([...dockerfile.matchAll(new RegExp(`^${op}\\s+(\\[.*\\])\\s*$`, 'gm'))].at(-1)?.[1] ?? 'null') as string[] | null;
  const entrypoint = last('ENTRYPOINT');
  const cmd = last('CMD');
  if (!entrypoint || !cmd || entrypoint[0] !== 'node') throw new Error(`infra/Dockerfile: expected exec-form ENTRYPOINT ["node", …] and CMD, found ${JSON.stringify({ entrypoint, cmd })}`);
  return [...entrypoint.slice(1), ...cmd];
}

describe('the image file tree (infra/assemble-image.sh)', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'ev-image-tree-'));
  const src = join(scratch, 'src');
  const out = join(scratch, 'out');
  const prefix = amqpPrefix('image_tree');
  let db: Awaited<ReturnType<typeof freshDatabase>> | undefined;
  /** On any failure the scratch folder and the database stay, for inspection. */
  let failures = 0;
  beforeEach(({ onTestFailed }) => {
    onTestFailed(() => void failures++);
  });

  beforeAll(async () => {
    try {
      db = await freshDatabase('image_tree');
      mkdirSync(src);
      expect(copyBuildContext(src), 'files in the build context').toBeGreaterThan(0);
      await run('npm', ['ci', '--prefer-offline', '--no-audit', '--no-fund'], { cwd: src });
      await run('npm', ['run', 'build'], { cwd: src });
      await run('npm', ['prune', '--omit=dev', '--no-audit', '--no-fund'], { cwd: src });
      await run('sh', ['infra/assemble-image.sh', out], { cwd: src });
    } catch (err) {
      failures++;
      throw new Error(`${err instanceof Error ? err.message : String(err)}\n(scratch folder kept: ${scratch})`, { cause: err });
    }
  }, BUILD_TIMEOUT_MS);

  afterAll(async () => {
    const conn = await amqplib.connect(TEST_AMQP_URL);
    try {
      const ch = await conn.createChannel();
      await deleteTopology(ch, loadTopology({ prefix }));
    } finally {
      await conn.close().catch(() => {});
    }
    if (failures === 0) {
      await db?.drop();
      rmSync(scratch, { recursive: true, force: true });
    } else {
      console.warn(`image tree test failed: scratch folder kept at ${scratch}, database ${db?.name ?? '(none)'}`);
    }
  }, 60_000);

  it('holds what the runtime reads and none of the build inputs', () => {
    for (const p of ['bin/everdict.js', 'rabbitmq/definitions.json', 'infra/config/fleet.json', 'infra/healthcheck.mjs', 'libs/store/migrations/0001_core.sql', 'schemas', 'cli/dist/src/main.js']) {
      expect(existsSync(join(out, p)), `${p} in the image tree`).toBe(true);
    }
    for (const p of ['tsconfig.json', 'libs/store/src', 'cli/src', 'test', 'node_modules/typescript', 'node_modules/vitest']) {
      expect(existsSync(join(out, p)), `${p} must not be in the image tree`).toBe(false);
    }
  });

  it('starts each of the five services as compose runs it: ready, then a clean drain on SIGTERM', async () => {
    const started: { name: string; port: number; proc: Proc }[] = [];
    try {
      for (const name of SERVICES) {
        const port = await freePort();
        const env = imageEnv({
          DATABASE_URL: db!.url,
          AMQP_URL: TEST_AMQP_URL,
          EVERDICT_AMQP_PREFIX: prefix,
          EVERDICT_CONFIG: join(out, 'infra', 'config', 'fleet.json'),
          // The sample `notes` connector's endpoint; never contacted (no effect runs here).
          EVERDICT_DEMO_NOTES_URL: 'http://127.0.0.1:9/demo/notes',
          PORT: String(port),
        });
        started.push({ name, port, proc: startFromTree(out, ['start', '--service', name], env) });
      }
      for (const s of started) await ready(s.name, s.port, s.proc);
      for (const s of started) s.proc.kill('SIGTERM');
      for (const s of started) {
        const timer = setTimeout(() => s.proc.kill('SIGKILL'), 30_000);
        const exit = await s.proc.exited;
        clearTimeout(timer);
        expect(exit, `${s.name} exit on SIGTERM\n${s.proc.output().slice(-4000)}`).toEqual({ code: 0, signal: null });
      }
    } finally {
      for (const s of started) s.proc.kill('SIGKILL'); // no-op for those already exited
    }
  }, 240_000);

  it('the default command with no variables set exits non-zero naming them, without a stack trace', async () => {
    const args = imageDefaultArgs();
    const proc = startFromTree(out, args.slice(1), imageEnv({}));
    const timer = setTimeout(() => proc.kill('SIGKILL'), 60_000);
    const exit = await proc.exited;
    clearTimeout(timer);
    const text = proc.output();
    expect(exit.signal, `node ${args.join(' ')} did not exit by itself:\n${text}`).toBeNull();
    expect(exit.code, text).not.toBe(0);
    expect(text).toMatch(/DATABASE_URL/);
    expect(text).toMatch(/AMQP_URL/);
    expect(text, 'a stack trace instead of a message').not.toMatch(/^\s+at .+[(:]\d+/m);
  }, 90_000);
});
