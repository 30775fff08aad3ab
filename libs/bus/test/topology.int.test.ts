/**
 * definitions.json on the real broker: `rabbitmqctl import_definitions` accepts it, and a
 * service asserting the topology against what was imported succeeds — the broker compares every
 * argument, so this proves the asserted topology is identical to the file. A drifted queue makes
 * the assertion fail loudly instead.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import amqplib from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_AMQP_URL, amqpPrefix } from '@everdict/testkit';
import { connectAmqp } from '../src/amqp.js';
import { deleteTopology, findDefinitionsFile, loadTopology } from '../src/topology.js';

const run = promisify(execFile);

describe('definitions.json on RabbitMQ', () => {
  let conn: amqplib.ChannelModel;
  let existedBefore = false;
  const production = loadTopology();
  const drifted = loadTopology({ prefix: amqpPrefix('bus topology drift') });

  async function exists(exchange: string): Promise<boolean> {
    const ch = await conn.createChannel();
    ch.on('error', () => {});
    try {
      await ch.checkExchange(exchange);
      await ch.close();
      return true;
    } catch {
      return false; // a failed check closes the channel
    }
  }

  beforeAll(async () => {
    conn = await amqplib.connect(TEST_AMQP_URL);
    existedBefore = await exists('everdict.events');
  });
  afterAll(async () => {
    const ch = await conn.createChannel();
    // The production names belong to whoever runs a real fleet on this broker: only remove them if we made them.
    if (!existedBefore) await deleteTopology(ch, production).catch(() => {});
    await deleteTopology(ch, drifted).catch(() => {});
    await conn.close();
  });

  it('imports with rabbitmqctl, and the asserted topology matches it exactly', async () => {
    const { stdout } = await run('rabbitmqctl', ['import_definitions', findDefinitionsFile()]);
    expect(stdout).toMatch(/Successfully started definition import/);
    expect(await exists('everdict.events')).toBe(true);
    expect(await exists('everdict.dlx')).toBe(true);

    const { stdout: queues } = await run('rabbitmqctl', ['list_queues', 'name', 'type', '-q', '--no-table-headers']);
    for (const q of production.queues) expect(queues).toMatch(new RegExp(`^${q.name.replace(/\./g, '\\.')}\\s+quorum$`, 'm'));

    const transport = await connectAmqp({ url: TEST_AMQP_URL, topology: production, connectionName: 'bus-topology-test', connectTimeoutMs: 10_000 });
    expect(transport.isReady()).toBe(true);
    await transport.close();
  });

  it('refuses to start against a drifted queue', async () => {
    const ch = await conn.createChannel();
    const q = drifted.queues.find((x) => x.name === `${drifted.prefix}.gate`)!;
    await ch.assertQueue(q.name, { durable: true, arguments: { ...q.arguments, 'x-delivery-limit': 99 } });
    await ch.close();
    await expect(connectAmqp({ url: TEST_AMQP_URL, topology: drifted, connectTimeoutMs: 5_000 })).rejects.toThrow(/PRECONDITION_FAILED|x-delivery-limit/);
  });
});
