/**
 * Intake as compose runs it (`everdict start --service intake`): boots from the environment
 * (fleet config + sources file naming its secret by variable), serves a signed webhook, drains
 * on SIGTERM with exit 0 — and the webhook secret and bearer token never reach its logs.
 */
import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import amqplib from 'amqplib';
import { afterAll, describe, expect, it } from 'vitest';
import { deleteTopology, loadTopology } from '@everdict/bus';
import { freePort } from '../../libs/intake-sources/test/dovecot.js';
import { TEST_AMQP_URL, amqpPrefix, eventually, everdictStartArgs, freshDatabase, readinessBudgetMs } from '@everdict/testkit';
import { TOKENS, call, fleetConfig } from './helpers.js';

const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');
const SECRET = 'standalone-webhook-secret-42';
const prefix = amqpPrefix('intake_main');
let drop: (() => Promise<void>) | undefined;

afterAll(async () => {
  const conn = await amqplib.connect(TEST_AMQP_URL);
  const ch = await conn.createChannel();
  await deleteTopology(ch, loadTopology({ prefix }));
  await conn.close();
  await drop?.();
});

describe('everdict start --service intake', () => {
  it('boots, opens a case from a signed webhook, keeps secrets out of its logs, exits 0 on SIGTERM', async () => {
    const database = await freshDatabase('intake_main');
    drop = database.drop;
    const dir = mkdtempSync(join(tmpdir(), 'everdict-intake-main-'));
    writeFileSync(join(dir, 'fleet.json'), JSON.stringify(fleetConfig()));
    writeFileSync(
      join(dir, 'sources.json'),
      JSON.stringify({ webhooks: [{ name: 'desk', caseType: 'support', secretsEnv: ['DESK_SECRET'], signature: { kind: 'hmac-sha256', header: 'X-Sig', encoding: 'hex' }, mapping: { kind: 'generic', id: { header: 'X-Delivery' }, title: '/subject' }, customer: 'acme' }] }),
    );
    const port = await freePort();
    const child = spawn(process.execPath, everdictStartArgs(['intake']), {
      cwd: REPO,
      env: { ...process.env, DATABASE_URL: database.url, AMQP_URL: TEST_AMQP_URL, EVERDICT_CONFIG: join(dir, 'fleet.json'), EVERDICT_INTAKE_SOURCES: join(dir, 'sources.json'), DESK_SECRET: SECRET, EVERDICT_AMQP_PREFIX: prefix, PORT: String(port), LOG_LEVEL: 'debug' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (b: Buffer) => (output += b.toString('utf8')));
    child.stderr.on('data', (b: Buffer) => (output += b.toString('utf8')));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    try {
      const url = `http://127.0.0.1:${port}`;
      await eventually(async () => (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200, { timeoutMs: readinessBudgetMs(), what: 'intake ready' });
      const body = JSON.stringify({ subject: 'Cannot log in' });
      const sig = createHmac('sha256', SECRET).update(body).digest('hex');
      const opened = await call(url, 'POST', '/v1/intake/desk', { raw: body, headers: { 'content-type': 'application/json', 'x-sig': sig, 'x-delivery': 'd-1' } });
      expect(opened.status).toBe(201);
      const shown = await call(url, 'GET', `/v1/cases/${opened.body['caseId'] as string}`, { token: TOKENS.acme });
      expect(shown.body).toMatchObject({ title: 'Cannot log in', customer: 'acme', caseType: 'support' });
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(output).toContain('intake started');
      expect(output).not.toContain(SECRET);
      expect(output).not.toContain(TOKENS.acme);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
