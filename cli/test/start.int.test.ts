import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import amqplib from 'amqplib';
import { afterAll, describe, expect, it } from 'vitest';
import { buildEnvelope, encodeEnvelope, newId, systemClock } from '@everdict/contracts';
import { deleteTopology, loadTopology } from '@everdict/bus';
import { Store, createPgDb } from '@everdict/store';
import { TEST_AMQP_URL, amqpPrefix, eventually, freshDatabase } from '@everdict/testkit';

const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));

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
    const node = startNode({ DATABASE_URL: url, AMQP_URL: TEST_AMQP_URL, EVERDICT_AMQP_PREFIX: prefix });
    try {
      const ready = await eventually(() => logged(node, 'fleet node ready'), { timeoutMs: 30_000, what: 'fleet node ready' });
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
      await eventually(() => logged(node, 'fleet node ready'), { timeoutMs: 30_000, what: 'fleet node ready' });
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
});
