/**
 * Which rows the relay claims on which wake-up, against real Postgres and RabbitMQ. A commit of
 * this process wakes it with the ids it wrote, and those rows are claimed by key; a row no local
 * commit named (written by another process) is claimed by a full claim — on a NOTIFY, or at the
 * poll, which still comes at least every pollMs while local commits keep the relay busy.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeEnvelope } from '@everdict/contracts';
import { eventually } from '@everdict/testkit';
import { OUTBOX_CHANNEL, outboxNotifyPayload } from '@everdict/store';
import { startOutboxRelay } from '../src/relay.js';
import type { OutboxRelay } from '../src/relay.js';
import type { BusFixture } from './helpers.js';
import { busFixture, runnable } from './helpers.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('the relay claims what a local commit named by key, the rest by a full claim', () => {
  let fx: BusFixture;
  let relay: OutboxRelay | undefined;

  beforeAll(async () => {
    fx = await busFixture('bus relay hints');
  });
  afterAll(async () => {
    await relay?.stop();
    await fx?.close();
  });

  const published = async (id: string) =>
    (await fx.db.query<{ published: boolean }>({ text: 'SELECT published_at IS NOT NULL AS published FROM outbox_messages WHERE message_id = $1::uuid', values: [id] })).rows[0]?.published === true;

  /** A row committed the way another process commits it: no wake-up reaches this relay. */
  async function foreignRow(): Promise<string> {
    const env = runnable();
    await fx.db.query({
      text: `INSERT INTO outbox_messages (message_id, type, routing_key, case_id, body) VALUES ($1::uuid, $2::text, $2::text, $3::uuid, $4::bytea)`,
      values: [env.id, env.type, env.caseId, Buffer.from(encodeEnvelope(env))],
    });
    return env.id;
  }

  /** A row committed by this process's unit of work: its id wakes the relay. */
  async function localRow(): Promise<string> {
    const env = runnable();
    await fx.store.unitOfWork((uow) => uow.enqueue({ id: env.id, type: env.type, caseId: env.caseId }, encodeEnvelope(env)));
    return env.id;
  }

  async function startRelay(pollMs: number): Promise<void> {
    await relay?.stop();
    relay = await startOutboxRelay({ store: fx.store, transport: await fx.transport(`relay-${pollMs}`), pollMs });
    // The first claim (a full one) and the LISTEN connection's own wake have run.
    await sleep(500);
  }

  it("a local wake claims only the rows its commit wrote; another process's rows wait for a NOTIFY naming them, or naming none", async () => {
    await startRelay(60_000);
    const [named, unnamed] = [await foreignRow(), await foreignRow()];
    const local = await localRow();
    await eventually(() => published(local), { timeoutMs: 5_000, what: 'the local row published' });
    await sleep(300);
    expect(await published(named)).toBe(false);
    expect(await published(unnamed)).toBe(false);

    // Another process's NOTIFY names its row: that one is claimed by key, the other still waits.
    await fx.db.query({ text: 'SELECT pg_notify($1::text, $2::text)', values: [OUTBOX_CHANNEL, outboxNotifyPayload([named])] });
    await eventually(() => published(named), { timeoutMs: 5_000, what: 'the named row published after its NOTIFY' });
    await sleep(300);
    expect(await published(unnamed)).toBe(false);

    // A NOTIFY naming nothing (or garbage) claims everything claimable.
    await fx.db.query({ text: `SELECT pg_notify('${OUTBOX_CHANNEL}', 'garbage')` });
    await eventually(() => published(unnamed), { timeoutMs: 5_000, what: 'the unnamed row published after a NOTIFY naming none' });
  });

  it('a pipeline woken after another took the named rows claims nothing', async () => {
    await startRelay(60_000);
    const [first, second, unnamed] = [await foreignRow(), await foreignRow(), await foreignRow()];
    // Two NOTIFYs of one transaction arrive together: the first wake-up wakes one pipeline, the
    // second the other, and the first to run claims both named rows by key.
    await fx.store.unitOfWork(async (uow) => {
      await uow.query({ text: 'SELECT pg_notify($1::text, $2::text)', values: [OUTBOX_CHANNEL, outboxNotifyPayload([first])] });
      await uow.query({ text: 'SELECT pg_notify($1::text, $2::text)', values: [OUTBOX_CHANNEL, outboxNotifyPayload([second])] });
    });
    await eventually(async () => (await published(first)) && (await published(second)), { timeoutMs: 5_000, what: 'both named rows published' });
    await sleep(300);
    // The other pipeline found no hint left; a full claim would have taken the unnamed row.
    expect(await published(unnamed)).toBe(false);
    await fx.db.query({ text: `SELECT pg_notify('${OUTBOX_CHANNEL}', '')` });
    await eventually(() => published(unnamed), { timeoutMs: 5_000, what: 'the unnamed row published after a NOTIFY naming none' });
  });

  it('while local commits keep waking it, a full claim still comes within the poll interval', async () => {
    await startRelay(400);
    const foreign = await foreignRow();
    const since = performance.now();
    const locals: string[] = [];
    let foreignAfterMs: number | null = null;
    while (performance.now() - since < 3_000) {
      locals.push(await localRow());
      if (foreignAfterMs === null && (await published(foreign))) foreignAfterMs = performance.now() - since;
      await sleep(30);
    }
    expect(foreignAfterMs, 'the foreign row was not published while local commits went on').not.toBeNull();
    expect(foreignAfterMs!).toBeLessThan(2_000);
    for (const id of locals) await eventually(() => published(id), { timeoutMs: 5_000, what: `local row ${id} published` });
  });
});
