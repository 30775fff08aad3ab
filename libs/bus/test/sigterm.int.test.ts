/**
 * SIGTERM to a consuming service under load (issue 2 acceptance): a real child process consumes
 * a steady stream and is sent SIGTERM mid-stream. It must exit 0; a second consumer then drains
 * the rest; every message is applied exactly once and none half-applied (each effect row has
 * its inbox row and each inbox row its effect row).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_AMQP_URL, eventually } from '@everdict/testkit';
import { startInboxConsumer } from '../src/consumer.js';
import type { InboxConsumer } from '../src/consumer.js';
import { publishEnvelope } from '../src/transport.js';
import type { BusFixture } from './helpers.js';
import { busFixture, countRows, handlersFor, recordEffect, runnable } from './helpers.js';

const TOTAL = 600;
const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));

describe('SIGTERM to a consuming service', () => {
  let fx: BusFixture;
  let second: InboxConsumer | undefined;

  beforeAll(async () => {
    fx = await busFixture('bus sigterm');
  });
  afterAll(async () => {
    await second?.stop();
    await fx?.close();
  });

  it('drains in-flight units of work, exits 0, and loses or doubles nothing', async () => {
    const transport = await fx.transport('producer');
    const child = spawn(process.execPath, ['--conditions=source', '--import', 'tsx', 'libs/bus/test/fixtures/consumer-service.ts'], {
      cwd: repoRoot,
      env: { ...process.env, DATABASE_URL: fx.dbUrl, AMQP_URL: TEST_AMQP_URL, PREFIX: fx.prefix },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (b: Buffer) => b.toString().includes('ready') && resolve());
      void exited.then(() => reject(new Error(`consumer service exited early: ${stderr}`)));
    });

    // A steady stream: 20 messages every 20 ms.
    const messages = Array.from({ length: TOTAL }, () => runnable());
    const producing = (async () => {
      for (let i = 0; i < TOTAL; i += 20) {
        await Promise.all(messages.slice(i, i + 20).map((m) => publishEnvelope(transport, m)));
        await new Promise((r) => setTimeout(r, 20));
      }
    })();

    await eventually(async () => (await countRows(fx.db, 'SELECT count(*) AS n FROM effects')) >= 150, { timeoutMs: 30_000, what: 'service under load' });
    const signalledAt = performance.now();
    child.kill('SIGTERM');
    const { code, signal } = await exited;
    expect({ code, signal }, stderr).toEqual({ code: 0, signal: null });
    expect(performance.now() - signalledAt).toBeLessThan(10_000);
    const appliedByFirst = await countRows(fx.db, 'SELECT count(*) AS n FROM effects');
    expect(appliedByFirst).toBeLessThan(TOTAL);

    second = await startInboxConsumer({
      store: fx.store,
      transport,
      service: 'turn-worker',
      prefetch: 16,
      handlers: handlersFor(fx.topology, 'turn-worker', async (env, uow) => {
        await recordEffect(env, uow);
      }),
    });
    await producing;
    await eventually(async () => (await countRows(fx.db, 'SELECT count(*) AS n FROM effects')) >= TOTAL, { timeoutMs: 30_000, what: 'the rest drained' });
    await new Promise((r) => setTimeout(r, 300)); // a late redelivery would show up as an extra row

    const { rows } = await fx.db.query<{ message_id: string }>({ text: 'SELECT message_id FROM effects' });
    expect(rows).toHaveLength(TOTAL);
    expect(new Set(rows.map((r) => r.message_id))).toEqual(new Set(messages.map((m) => m.id)));
    const orphans = await countRows(
      fx.db,
      `SELECT count(*) AS n FROM effects e FULL JOIN inbox_messages i ON i.message_id = e.message_id AND i.consumer = 'turn-worker'
        WHERE e.message_id IS NULL OR i.message_id IS NULL`,
    );
    expect(orphans).toBe(0);
  });
});
