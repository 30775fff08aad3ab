/**
 * Issue 12 item 4 on a real fleet node (`everdict start --service intake --service turn-worker`)
 * against a Postgres cluster of this test's own (initdb into a temp dir, its own port; the
 * shared server on 5432 is never touched), with the shared RabbitMQ under a prefix of its own.
 *
 * Two units of work are held open across a fast shutdown of Postgres: the turn-worker's
 * delivery of task.runnable (its inbox insert waits on a lock this test holds) and an intake
 * request opening a case (its case insert waits on another). Then:
 * - the process stays alive (an 'error' on a checked-out connection used to kill it);
 * - the blocked request is answered 503 with Retry-After; during the outage /readyz is 503 and
 *   the API answers 503, never 500;
 * - after Postgres is back, /readyz is 200 again, the retried request opens its case, and the
 *   held delivery is processed: the first case's task runs to done.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import amqplib from 'amqplib';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import { deleteTopology, loadTopology } from '@everdict/bus';
import { createPgDb, migrate } from '@everdict/store';
import type { Db } from '@everdict/store';
import { TEST_AMQP_URL, amqpPrefix, eventually, everdictStartArgs, freePort, readinessBudgetMs, startPgCluster } from '@everdict/testkit';
import type { PgCluster } from '@everdict/testkit';

const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');
const TOKEN = 'pg-restart-agent-token-01';
const prefix = amqpPrefix('pg_restart');
/** Long enough that the slow case's turn is still running when Postgres goes down. */
const SLOW_TOOL_MS = 2_500;

function fleetConfig(): FleetConfig {
  return {
    version: 1,
    routes: { r: { adapter: 'scripted', model: 'script-r', scriptPath: 'r.json' }, s: { adapter: 'scripted', model: 'script-s', scriptPath: 's.json' } },
    tools: {
      lookup: { builtin: 'static', description: 'Look something up.', output: 'the answer is 42' },
      slow: { builtin: 'static', description: 'Look something up, slowly.', output: 'the answer is 43', delayMs: SLOW_TOOL_MS },
    },
    profiles: {
      p: { version: '1', route: 'r', prompt: 'Answer the ticket.', tools: ['lookup'] },
      q: { version: '1', route: 's', prompt: 'Answer the ticket slowly.', tools: ['slow'] },
    },
    caseTypes: { ticket: { rootProfile: 'p', scope: { reads: 'all', writes: [], forbidden: [] } }, slow: { rootProfile: 'q', scope: { reads: 'all', writes: [], forbidden: [] } } },
    principals: { acme: { tokenHash: `sha256:${sha256Hex(TOKEN)}`, roles: ['customer'], customers: ['acme'] } },
    runtime: { leaseTtlMs: 3000, sweepIntervalMs: 250 },
  };
}

describe('a Postgres fast restart with units of work open', () => {
  let cluster: PgCluster | undefined;
  let db: Db | undefined;
  let node: ChildProcess | undefined;
  let output = '';
  let exited: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  let base = '';
  let dir = '';

  beforeAll(async () => {
    cluster = await startPgCluster();
    db = createPgDb(cluster.url, { max: 2 });
    await migrate(db);
    dir = mkdtempSync(join(tmpdir(), 'ev-pg-restart-fleet-'));
    writeFileSync(join(dir, 'fleet.json'), JSON.stringify(fleetConfig()));
    writeFileSync(join(dir, 'r.json'), JSON.stringify({ steps: [{ toolCalls: [{ name: 'lookup', arguments: {} }] }, { text: 'done: 42' }] }));
    writeFileSync(join(dir, 's.json'), JSON.stringify({ steps: [{ toolCalls: [{ name: 'slow', arguments: {} }] }, { text: 'done: 43' }] }));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    node = spawn(process.execPath, everdictStartArgs(['intake', 'turn-worker']), {
      cwd: REPO,
      env: { ...process.env, DATABASE_URL: cluster.url, AMQP_URL: TEST_AMQP_URL, EVERDICT_CONFIG: join(dir, 'fleet.json'), EVERDICT_AMQP_PREFIX: prefix, EVERDICT_WORKER_NAME: 'pg-restart', PORT: String(port), LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (b: Buffer) => (output = (output + b.toString('utf8')).slice(-100_000));
    node.stdout!.on('data', keep);
    node.stderr!.on('data', keep);
    node.once('exit', (code, signal) => (exited = { code, signal }));
    await eventually(
      async () => {
        if (exited) throw new Error(`the node exited during start:\n${output.slice(-3000)}`);
        return (await fetch(`${base}/readyz`).catch(() => null))?.status === 200;
      },
      { timeoutMs: readinessBudgetMs(), intervalMs: 100, what: 'fleet node ready' },
    );
  }, 60_000 + readinessBudgetMs());

  afterAll(async () => {
    if (node && !exited) {
      node.kill('SIGTERM');
      await eventually(() => exited !== undefined, { timeoutMs: 15_000, what: 'node exit' }).catch(() => node?.kill('SIGKILL'));
    }
    await db?.close().catch(() => undefined);
    const conn = await amqplib.connect(TEST_AMQP_URL);
    const ch = await conn.createChannel();
    await deleteTopology(ch, loadTopology({ prefix })).catch(() => undefined);
    await conn.close().catch(() => undefined);
    cluster?.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const api = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  /** Sessions blocked by the holder's locks on `table`. */
  const waiting = async (holder: pg.Client, table: string) =>
    (
      await holder.query<{ n: number }>(
        `SELECT count(DISTINCT l.pid)::int AS n FROM pg_locks l
          WHERE NOT l.granted AND l.relation = $1::regclass AND pg_backend_pid() = ANY(pg_blocking_pids(l.pid))`,
        [table],
      )
    ).rows[0]!.n;

  it('stays alive, answers 503 (never 500) during the outage, flips /readyz and finishes its work', async () => {
    const c = cluster!;
    const holder = new pg.Client({ connectionString: c.url });
    holder.on('error', () => undefined); // the fast shutdown terminates this session too
    await holder.connect();

    // Case S: its turn runs a slow tool, so the turn spans the outage.
    const slow = await api('POST', '/v1/cases', { caseType: 'slow', title: 'a slow turn' }, { 'idempotency-key': 'case-s' });
    expect(slow.status).toBe(201);
    const caseS = ((await slow.json()) as { caseId: string }).caseId;
    await eventually(async () => (await holder.query(`SELECT 1 FROM tasks WHERE case_id = $1 AND state = 'running'`, [caseS])).rowCount === 1, { timeoutMs: 30_000, what: 'the slow turn running' });

    await holder.query('BEGIN');
    await holder.query('LOCK TABLE inbox_messages IN EXCLUSIVE MODE');

    // Case A opens (intake writes no inbox row); the worker's delivery of its task.runnable
    // then waits on the inbox lock with its unit of work open.
    const a = await api('POST', '/v1/cases', { caseType: 'ticket', title: 'before the restart' }, { 'idempotency-key': 'case-a' });
    expect(a.status).toBe(201);
    const caseA = ((await a.json()) as { caseId: string }).caseId;
    await eventually(async () => (await waiting(holder, 'inbox_messages')) > 0, { timeoutMs: 30_000, what: 'the worker waiting on the inbox lock' }).catch(async (err: unknown) => {
      const act = (await holder.query(`SELECT l.locktype, l.relation::regclass::text AS rel, l.mode, l.granted, a.state, left(a.query, 120) AS q FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE NOT l.granted`)).rows;
      const outbox = (await holder.query(`SELECT type, published_at IS NOT NULL AS published FROM outbox_messages`).catch((e: unknown) => ({ rows: [String(e)] }))).rows;
      throw new Error(`${String(err)}\n${JSON.stringify(act, null, 1)}\n${JSON.stringify(outbox)}\n${output.slice(-4000)}`);
    });

    // Case B: intake's own unit of work waits on the cases lock.
    await holder.query('LOCK TABLE cases IN EXCLUSIVE MODE');
    const b = api('POST', '/v1/cases', { caseType: 'ticket', title: 'across the restart' }, { 'idempotency-key': 'case-b' });
    await eventually(async () => (await waiting(holder, 'cases')) > 0, { timeoutMs: 30_000, what: 'intake waiting on the cases lock' });

    c.stop(); // pg_ctl stop -m fast: every session, open transactions included, is terminated
    const blocked = await b;
    expect(blocked.status).toBe(503);
    expect(blocked.headers.get('retry-after')).toMatch(/^\d+$/);

    // The outage: readiness says so, the API answers 503 with Retry-After, never 500.
    await eventually(async () => (await fetch(`${base}/readyz`)).status === 503, { timeoutMs: 10_000, what: '/readyz 503 while Postgres is down' });
    const seen: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await api('GET', `/v1/cases/${caseA}`);
      seen.push(r.status);
      if (r.status === 503) expect(r.headers.get('retry-after')).toMatch(/^\d+$/);
      const opened = await api('POST', '/v1/cases', { caseType: 'ticket', title: 'during the outage' }, { 'idempotency-key': 'case-c' });
      seen.push(opened.status);
      await new Promise((r2) => setTimeout(r2, 200));
    }
    expect(new Set(seen)).toEqual(new Set([503]));
    expect(exited).toBeUndefined();

    c.start();
    await eventually(async () => (await fetch(`${base}/readyz`)).status === 200, { timeoutMs: readinessBudgetMs(), intervalMs: 200, what: '/readyz 200 after Postgres is back' }).catch((err: unknown) => {
      throw new Error(`${String(err)}; the node ${exited ? `exited (${JSON.stringify(exited)})` : 'is running'}:\n${output.slice(-4000)}`);
    });
    expect(exited).toBeUndefined();

    // The request that failed with 503 is retried and opens its case once.
    const retried = await api('POST', '/v1/cases', { caseType: 'ticket', title: 'across the restart' }, { 'idempotency-key': 'case-b' });
    expect(retried.status).toBe(201);
    const caseB = ((await retried.json()) as { caseId: string }).caseId;

    // The delivery held across the restart is processed and the slow turn is finished (or
    // redone): every case's root task ends done.
    const states = async () => (await db!.query<{ state: string }>({ text: 'SELECT state FROM tasks WHERE case_id = ANY($1::uuid[]) ORDER BY state', values: [[caseA, caseB, caseS]] })).rows.map((r) => r.state);
    await eventually(async () => (await states().catch(() => [])).join() === 'done,done,done', { timeoutMs: 60_000, intervalMs: 250, what: 'every task done' }).catch(async (err: unknown) => {
      throw new Error(`${String(err)}: ${JSON.stringify(await states().catch(() => []))}\n${output.slice(-4000)}`);
    });
    expect(exited).toBeUndefined();
    expect(output).not.toMatch(/uncaught error/);
    const deadLetters = (await db!.query<{ n: number }>({ text: 'SELECT count(*)::int AS n FROM dead_letters' })).rows[0]!.n;
    expect(deadLetters).toBe(0);
    await holder.end().catch(() => undefined);
  }, 180_000);
});
