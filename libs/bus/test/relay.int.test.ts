/**
 * The outbox relay under a forcibly closed broker connection (issue 2 acceptance): while the
 * relay publishes 5,000 committed outbox rows, the broker closes its connections
 * (`rabbitmqctl close_connection`, this file's connections only, so test files running alongside
 * are not cut off). Every row must end up marked published and delivered at least once — a
 * consumer on the same prefixed queue, whose connection is cut too, counts distinct ids — and
 * none may be lost.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeEnvelope } from '@everdict/contracts';
import { eventually } from '@everdict/testkit';
import { startOutboxRelay } from '../src/relay.js';
import type { OutboxRelay } from '../src/relay.js';
import type { Subscription } from '../src/transport.js';
import type { BusFixture } from './helpers.js';
import { busFixture, closeBrokerConnections, countRows, countingMetrics, recordingLogger, runnable } from './helpers.js';

const TOTAL = 5000;
const PER_COMMIT = 100;
const AFTER_CUT = 1000;

describe('outbox relay through a forced disconnect', () => {
  let fx: BusFixture;
  let relay: OutboxRelay | undefined;
  let subscription: Subscription | undefined;

  beforeAll(async () => {
    fx = await busFixture('bus relay');
  });
  afterAll(async () => {
    await relay?.stop();
    await subscription?.stop();
    await fx?.close();
  });

  it('publishes and marks every row exactly once or more, none lost', async () => {
    const relayLog = recordingLogger();
    const relayMetrics = countingMetrics();
    const relayTransport = await fx.transport('relay', relayLog);
    const consumerTransport = await fx.transport('consumer');
    // Counts what the broker delivers, straight off the transport (no inbox: every copy counts).
    const delivered = new Set<string>();
    let deliveries = 0;
    subscription = await consumerTransport.subscribe(
      'turn-worker',
      async (d) => {
        deliveries++;
        if (d.messageId) delivered.add(d.messageId);
        return 'ack';
      },
      { prefetch: 200 },
    );
    relay = await startOutboxRelay({ store: fx.store, transport: relayTransport, batchSize: 200, pollMs: 200, metrics: relayMetrics, logger: relayLog });

    // Producers commit outbox rows steadily, so the relay is mid-stream when the broker cuts it off.
    // The last AFTER_CUT rows wait for the cut: rabbitmqctl takes seconds to start, and on a busy
    // machine the producer could otherwise finish (and the relay drain) before the cut lands,
    // leaving nothing to publish across the reconnection.
    let cutDone!: () => void;
    const cut = new Promise<void>((r) => (cutDone = r));
    const ids: string[] = [];
    const producing = (async () => {
      for (let done = 0; done < TOTAL; done += PER_COMMIT) {
        if (done === TOTAL - AFTER_CUT) await cut;
        await fx.store.unitOfWork(async (uow) => {
          for (let i = 0; i < PER_COMMIT; i++) {
            const env = runnable();
            ids.push(env.id);
            await uow.enqueue({ id: env.id, type: env.type, caseId: env.caseId }, encodeEnvelope(env));
          }
        });
        await new Promise((r) => setTimeout(r, 30));
      }
    })();

    await eventually(async () => (await countRows(fx.db, 'SELECT count(*) AS n FROM outbox_messages WHERE published_at IS NOT NULL')) >= 500, { what: 'relay under way' });
    const closed = await closeBrokerConnections(fx.prefix).finally(cutDone);
    expect(closed).toBe(2);
    const publishedAtCut = await countRows(fx.db, 'SELECT count(*) AS n FROM outbox_messages WHERE published_at IS NOT NULL');
    expect(publishedAtCut).toBeLessThan(TOTAL);
    await producing;

    await eventually(async () => (await countRows(fx.db, 'SELECT count(*) AS n FROM outbox_messages WHERE published_at IS NULL')) === 0, {
      timeoutMs: 40_000,
      what: 'every outbox row marked published',
    });
    await eventually(() => delivered.size === TOTAL, { timeoutMs: 30_000, what: 'every row delivered' });
    expect(delivered).toEqual(new Set(ids));
    expect(deliveries).toBeGreaterThanOrEqual(TOTAL);
    expect(await countRows(fx.db, 'SELECT count(*) AS n FROM outbox_messages')).toBe(TOTAL);
    expect(relayLog.lines.some((l) => l.msg.startsWith('broker disconnected'))).toBe(true);
    expect(relayMetrics.get('confirmed')).toBeGreaterThanOrEqual(TOTAL);
  });
});
