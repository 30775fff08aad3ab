/**
 * A REAL fleet node for the console tests: `everdict start --service intake --service gate`
 * (libs/testkit's everdictStartArgs, the one composition root) on a database and broker prefix
 * of the test file's own, plus a client pool on the same database for assertions.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import amqplib from 'amqplib';
import { sha256Hex } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import { deleteTopology, loadTopology } from '@everdict/bus';
import { createPgDb } from '@everdict/store';
import type { Db } from '@everdict/store';
import { TEST_AMQP_URL, amqpPrefix, eventually, everdictStartArgs, freePort, freshDatabase, readinessBudgetMs } from '@everdict/testkit';

const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');

export const CONSOLE_TOKENS = {
  acme: 'console-acme-token-01',
  globex: 'console-globex-token-02',
  olga: 'console-operator-olga-03',
} as const;

const hashOf = (t: string) => `sha256:${sha256Hex(t)}`;

export function consoleFleet(): FleetConfig {
  return {
    version: 1,
    routes: { r: { adapter: 'scripted', model: 'none', scriptPath: 'none.json' } },
    profiles: { p: { version: '1', route: 'r', prompt: 'console test', budget: { maxActiveMinutes: 30 } } },
    caseTypes: { support: { rootProfile: 'p', scope: { reads: 'all', writes: [], forbidden: [] } } },
    principals: {
      acme: { tokenHash: hashOf(CONSOLE_TOKENS.acme), roles: ['customer'], customers: ['acme'] },
      globex: { tokenHash: hashOf(CONSOLE_TOKENS.globex), roles: ['customer'], customers: ['globex'] },
      olga: { tokenHash: hashOf(CONSOLE_TOKENS.olga), roles: ['operator', 'finance'] },
    },
  };
}

export interface ConsoleNode {
  readonly url: string;
  readonly db: Db;
  readonly prefix: string;
  output(): string;
  stop(): Promise<void>;
}

export async function startConsoleNode(label: string): Promise<ConsoleNode> {
  const database = await freshDatabase(label);
  const prefix = amqpPrefix(label);
  const db = createPgDb(database.url, { max: 4 });
  const dir = mkdtempSync(join(tmpdir(), 'everdict-console-'));
  writeFileSync(join(dir, 'fleet.json'), JSON.stringify(consoleFleet()));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let output = '';
  let stopped: Promise<void> | undefined;
  const child: ChildProcess = spawn(process.execPath, everdictStartArgs(['intake', 'gate']), {
    cwd: REPO,
    env: { ...process.env, DATABASE_URL: database.url, AMQP_URL: TEST_AMQP_URL, EVERDICT_CONFIG: join(dir, 'fleet.json'), EVERDICT_AMQP_PREFIX: prefix, PORT: String(port), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (b: Buffer) => (output += b.toString('utf8')));
  child.stderr!.on('data', (b: Buffer) => (output += b.toString('utf8')));
  await eventually(async () => (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200, { timeoutMs: readinessBudgetMs(), what: 'node ready' }).catch((err: unknown) => {
    child.kill('SIGKILL');
    throw new Error(`${String(err)}\n${output.slice(-3000)}`);
  });
  return {
    url,
    db,
    prefix,
    output: () => output,
    stop() {
      stopped ??= stopAll();
      return stopped;
    },
  };
  async function stopAll(): Promise<void> {
    {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      await db.close();
      const conn = await amqplib.connect(TEST_AMQP_URL);
      try {
        const ch = await conn.createChannel();
        await deleteTopology(ch, loadTopology({ prefix }));
        await ch.close();
      } finally {
        await conn.close();
      }
      await database.drop();
    }
  }
}

/** Opens a case for acme through the API; returns its id. */
export async function openAcmeCase(url: string, key: string): Promise<string> {
  const r = await fetch(`${url}/v1/cases`, {
    method: 'POST',
    headers: { authorization: `Bearer ${CONSOLE_TOKENS.acme}`, 'content-type': 'application/json' },
    body: JSON.stringify({ caseType: 'support', title: `console ${key}`, originKey: key }),
  });
  if (r.status !== 201) throw new Error(`open case: ${r.status} ${await r.text()}`);
  return ((await r.json()) as { caseId: string }).caseId;
}
