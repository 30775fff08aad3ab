import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import amqplib from 'amqplib';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { buildEnvelope, encodeEnvelope, newId, systemClock } from '@everdict/contracts';
import { deleteTopology, loadTopology } from '@everdict/bus';
import { Store, createPgDb } from '@everdict/store';
import { TEST_AMQP_URL, amqpPrefix, eventually, freshDatabase, readinessBudgetMs } from '@everdict/testkit';

const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const SAMPLE_CONFIG = fileURLToPath(new URL('../../infra/config/fleet.json', import.meta.url));
/** The sample `notes` connector's endpoint variable; never contacted here (no effect runs). */
const NOTES_URL = { EVERDICT_DEMO_NOTES_URL: 'http://127.0.0.1:9/demo/notes' };

interface Node {
  child: ChildProcess;
  lines: string[];
  exited: Promise<number | null>;
}

function startNode(env: Record<string, string | undefined>, args: readonly string[] = []): Node {
  const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', main, 'start', ...args], {
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', DATABASE_URL: undefined, AMQP_URL: undefined, ...env } as NodeJS.ProcessEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let buf = '';
  child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop() ?? '';
    lines.push(...parts);
  });
  child.stderr!.on('data', (d: Buffer) => lines.push(d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, lines, exited };
}

function logged(node: Node, msg: string): Record<string, unknown> | undefined {
  for (const l of node.lines) {
    try {
      const o = JSON.parse(l) as Record<string, unknown>;
      if (o.msg === msg) return o;
    } catch {
      // not a JSON line
    }
  }
  return undefined;
}

describe('everdict start (fleet node)', () => {
  const prefix = amqpPrefix('cli_start');
  afterAll(async () => {
    const conn = await amqplib.connect(TEST_AMQP_URL);
    const ch = await conn.createChannel();
    await deleteTopology(ch, loadTopology({ prefix }));
    await conn.close();
  });

  it('migrates, asserts topology, relays the outbox, serves health and metrics, drains on SIGTERM', async () => {
    const { url } = await freshDatabase('cli_start');
    const node = startNode({ DATABASE_URL: url, AMQP_URL: TEST_AMQP_URL, EVERDICT_AMQP_PREFIX: prefix, EVERDICT_CONFIG: SAMPLE_CONFIG }, ['--service', 'gate']);
    try {
      const ready = await eventually(() => logged(node, 'fleet node ready'), { timeoutMs: readinessBudgetMs(), what: 'fleet node ready' });
      expect(ready.prefix).toBe(prefix);
      const port = logged(node, 'health and metrics listening')!.port as number;
      await eventually(async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200, { what: '/readyz 200' });

      // A committed outbox row is published by the node's relay and marked only after the confirm.
      const db = createPgDb(url, { max: 2 });
      const store = new Store(db);
      const caseId = newId();
      const env = buildEnvelope(
        {
          type: 'task.runnable',
          version: 1,
          caseId,
          lineage: { rootCaseId: caseId, parentTaskId: null, ancestry: [] },
          sender: { service: 'intake', taskId: null, profile: null, profileVersion: null },
          trust: 'platform',
          payload: { taskId: newId(), reason: 'opened' },
        },
        systemClock,
      );
      await store.unitOfWork((uow) => uow.enqueue(env, encodeEnvelope(env)));
      await eventually(async () => {
        const { rows } = await db.query<{ published_at: Date | null }>({ text: 'SELECT published_at FROM outbox_messages WHERE message_id = $1', values: [env.id] });
        return rows[0]?.published_at;
      }, { what: 'outbox row published' });
      await db.close();

      // The message really reached the turn-worker queue of this prefix.
      const conn = await amqplib.connect(TEST_AMQP_URL);
      const ch = await conn.createChannel();
      const got = await eventually(async () => (await ch.get(`${prefix}.turn-worker`, { noAck: true })) || undefined, { what: 'message on queue' });
      expect(got.properties.messageId).toBe(env.id);
      await conn.close();

      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      expect(metrics).toMatch(/^everdict_bus_published_total\{.*type="task\.runnable".*\} 1$/m);
      expect(metrics).toContain('everdict_outbox_pending');

      node.child.kill('SIGTERM');
      expect(await node.exited).toBe(0);
    } finally {
      node.child.kill('SIGKILL');
    }
  });

  it('serves the demo notebook next to intake when EVERDICT_DEMO_NOTES_DIR is set (the compose demo target)', async () => {
    const { url } = await freshDatabase('cli_start_notes');
    const config = fileURLToPath(new URL('../../infra/config/fleet.json', import.meta.url));
    const node = startNode({ DATABASE_URL: url, AMQP_URL: TEST_AMQP_URL, EVERDICT_AMQP_PREFIX: prefix, EVERDICT_CONFIG: config, EVERDICT_DEMO_NOTES_DIR: mkdtempSync(join(tmpdir(), 'everdict-notes-')) }, ['--service', 'intake']);
    try {
      await eventually(() => logged(node, 'fleet node ready'), { timeoutMs: readinessBudgetMs(), what: 'fleet node ready' });
      const port = logged(node, 'health and metrics listening')!.port as number;
      const res = await fetch(`http://127.0.0.1:${port}/demo/notes/notes`);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ count: 0 });
      node.child.kill('SIGTERM');
      expect(await node.exited).toBe(0);
    } finally {
      node.child.kill('SIGKILL');
    }
  });

  it('with only one of the two URLs set, names the missing one and exits non-zero (never half embedded)', async () => {
    for (const [given, missing] of [[{ DATABASE_URL: 'postgres://127.0.0.1:1/none' }, 'AMQP_URL'], [{ AMQP_URL: TEST_AMQP_URL }, 'DATABASE_URL']] as const) {
      const node = startNode(given);
      expect(await node.exited).toBe(2);
      const text = node.lines.join('\n');
      expect(text).toContain(`${missing}: is required because`);
    }
  });

  /** Copies the sample fleet config into a scratch folder (script paths made absolute) so a test can rewrite it. */
  function scratchConfig(): { path: string; config: Record<string, unknown>; write(c: unknown): void } {
    const dir = mkdtempSync(join(tmpdir(), 'everdict-hup-'));
    const config = JSON.parse(readFileSync(SAMPLE_CONFIG, 'utf8')) as { routes: Record<string, { scriptPath?: string }> };
    for (const r of Object.values(config.routes)) if (r.scriptPath) r.scriptPath = join(dirname(SAMPLE_CONFIG), r.scriptPath);
    const path = join(dir, 'fleet.json');
    const write = (c: unknown) => writeFileSync(path, JSON.stringify(c, null, 2));
    write(config);
    return { path, config, write };
  }

  async function tablesIn(url: string): Promise<number> {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      return (await c.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'public'")).rows[0]!.n;
    } finally {
      await c.end();
    }
  }

  async function queueExists(name: string): Promise<boolean> {
    const conn = await amqplib.connect(TEST_AMQP_URL);
    try {
      const ch = await conn.createChannel();
      ch.on('error', () => {});
      return await ch.checkQueue(name).then(() => true, () => false);
    } finally {
      await conn.close().catch(() => {});
    }
  }

  it('a node with no service to run refuses to start instead of answering /readyz while idle', async () => {
    const { url } = await freshDatabase('cli_start_idle');
    const node = startNode({ DATABASE_URL: url, AMQP_URL: TEST_AMQP_URL, EVERDICT_AMQP_PREFIX: `${prefix}_idle`, EVERDICT_CONFIG: undefined });
    expect(await node.exited).toBe(2);
    expect(node.lines.join('\n')).toContain('--service: no service can run on this node: every service needs EVERDICT_CONFIG');
    expect(await tablesIn(url)).toBe(0);
  });

  it('reports every configuration problem together, in one format, before touching the database or the broker', async () => {
    const { url } = await freshDatabase('cli_start_bad');
    const scratch = scratchConfig();
    const broken = structuredClone(scratch.config) as { profiles: Record<string, { route: string }> };
    broken.profiles[Object.keys(broken.profiles)[0]!]!.route = 'nowhere';
    scratch.write(broken);
    const badPrefix = `${prefix}_bad`;
    const node = startNode(
      { DATABASE_URL: url, AMQP_URL: TEST_AMQP_URL, EVERDICT_AMQP_PREFIX: badPrefix, EVERDICT_CONFIG: scratch.path, EVERDICT_CRASHPOINT: 'no_such_point:1', EVERDICT_DISPATCH_LEASE_MS: '5', PORT: 'eighty' },
      ['--service', 'execution-coordinator'],
    );
    expect(await node.exited).toBe(2);
    const text = node.lines.join('\n');
    expect(text).toMatch(/everdict: config_invalid: invalid configuration \(\d+ problems\):\n {2}\S/);
    for (const expected of [/^ {2}PORT: must be an integer/m, /^ {2}EVERDICT_DISPATCH_LEASE_MS: must be an integer 200-/m, /^ {2}EVERDICT_CONFIG: \/profiles\/\S+\/route names route "nowhere"/m, /^ {2}EVERDICT_CRASHPOINT: EVERDICT_CRASHPOINT entry "no_such_point:1"/m]) {
      expect(text).toMatch(expected);
    }
    expect(text).not.toMatch(/\n\s+at /); // a message, not a stack trace
    expect(await tablesIn(url)).toBe(0);
    expect(await queueExists(`${badPrefix}.execution-coordinator`)).toBe(false);
  });

  it('EVERDICT_CRASHPOINT naming no point of the node exits non-zero naming the point', async () => {
    const { url } = await freshDatabase('cli_start_crash');
    const node = startNode(
      { DATABASE_URL: url, AMQP_URL: TEST_AMQP_URL, EVERDICT_AMQP_PREFIX: `${prefix}_crash`, EVERDICT_CONFIG: SAMPLE_CONFIG, ...NOTES_URL, EVERDICT_CRASHPOINT: 'no_such_point:1' },
      ['--service', 'execution-coordinator'],
    );
    expect(await node.exited).toBe(2);
    const text = node.lines.join('\n');
    expect(text).toContain('no_such_point');
    expect(text).toContain('before_execute|after_execute|after_outcome');
    expect(await tablesIn(url)).toBe(0);
  });

  it('SIGHUP on a node running every service reloads the fleet config; a broken file is refused and the node keeps running', async () => {
    const { url } = await freshDatabase('cli_start_hup');
    const scratch = scratchConfig();
    const hupPrefix = `${prefix}_hup`;
    const node = startNode({ DATABASE_URL: url, AMQP_URL: TEST_AMQP_URL, EVERDICT_AMQP_PREFIX: hupPrefix, EVERDICT_CONFIG: scratch.path, ...NOTES_URL });
    try {
      const ready = await eventually(() => logged(node, 'fleet node ready'), { timeoutMs: readinessBudgetMs(60_000), what: 'fleet node ready' });
      expect(ready.services).toEqual(['intake', 'turn-worker', 'gate', 'execution-coordinator', 'reconciler']);
      const port = logged(node, 'health and metrics listening')!.port as number;
      const reloads = async (outcome: string) => {
        const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        return Number(new RegExp(`^everdict_config_reloads_total\\{[^}]*outcome="${outcome}"[^}]*\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
      };

      node.child.kill('SIGHUP');
      await eventually(() => logged(node, 'fleet config reloaded'), { what: 'reload logged' });
      expect(await reloads('applied')).toBe(1);

      const broken = structuredClone(scratch.config) as { principals?: unknown; routes: unknown };
      broken.routes = 'not an object';
      scratch.write(broken);
      node.child.kill('SIGHUP');
      const refused = await eventually(() => logged(node, 'fleet config reload refused; keeping the running config'), { what: 'reload refused' });
      expect(refused.problems).toEqual(expect.arrayContaining([expect.objectContaining({ path: '/routes' })]));
      expect(await reloads('refused')).toBe(1);
      expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
      expect(node.child.exitCode).toBeNull();

      // Connectors are opened at start: a valid file changing the section is refused too.
      const retimed = structuredClone(scratch.config) as { connectors: Record<string, { timeoutMs?: number }> };
      retimed.connectors['notes']!.timeoutMs = 1234;
      scratch.write(retimed);
      node.child.kill('SIGHUP');
      await eventually(async () => (await reloads('refused')) === 2, { what: 'connectors change refused' });
      expect(node.lines.join('\n')).toContain('a connectors change needs a restart');
      expect(node.child.exitCode).toBeNull();

      node.child.kill('SIGTERM');
      expect(await node.exited).toBe(0);
    } finally {
      node.child.kill('SIGKILL');
      const conn = await amqplib.connect(TEST_AMQP_URL);
      const ch = await conn.createChannel();
      await deleteTopology(ch, loadTopology({ prefix: hupPrefix })).catch(() => {});
      await conn.close();
    }
  });
});
