/**
 * Acceptance (issue 12 item 9), a broker that loses a node: a 3-node RabbitMQ cluster of the
 * test's own (beside the shared broker, never touching it), two turn-worker processes whose
 * AMQP_URL lists all three nodes, a few hundred cases of scripted agents. Mid-run the node every
 * worker is connected to (the first of the list) stops its RabbitMQ application; cases keep
 * arriving and every case so far finishes on the two surviving nodes; then it starts again and
 * more cases arrive. Afterwards: every queue is a quorum queue with a member on each
 * node; no message lost (every outbox message was published, every task.runnable reached the
 * turn-worker's inbox, nothing was dead-lettered); no effect doubled (every tool call executed
 * once, one checkpoint per turn); every case ended; every ledger verifies.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordStream, startRabbitCluster, toolTrace, type RabbitCluster } from '@everdict/testkit';
import { call, eventually, say, testConfig, turnsFixture, type TurnsFixture, type WorkerProc } from '../turns/helpers.js';

const CASES = Number(process.env.CLUSTER_CASES ?? 300);
const TURNS = 3;

interface QueueRow {
  name: string;
  type: string;
  members: string[];
  online: string[];
}

describe('a broker that loses a node', () => {
  let cluster: RabbitCluster;
  let fx: TurnsFixture;
  const workers: WorkerProc[] = [];
  const outputs: (() => string)[] = [];

  beforeAll(async () => {
    cluster = await startRabbitCluster({ size: 3 });
    fx = await turnsFixture(
      'infra_cluster',
      testConfig({
        routes: { main: 'main.json' },
        profiles: { agent: { version: '1', route: 'main', prompt: 'You answer tickets.', tools: ['lookup'] } },
        runtime: { leaseTtlMs: 3000, sweepIntervalMs: 500, prefetch: 64 },
      }),
    );
    fx.writeScript('main', [...Array.from({ length: TURNS }, (_, i) => call(['lookup', { page: i }])), say('resolved')]);
    for (const name of ['w1', 'w2']) {
      // debug: the `tool started` trace, written at execution time, counts real executions.
      const w = await fx.worker(name, { AMQP_URL: cluster.url, LOG_LEVEL: 'debug' });
      outputs.push(recordStream(w.proc.stdout!, w.output()));
      workers.push(w);
    }
  }, 170_000);

  afterAll(async () => {
    await fx?.close();
    await cluster?.destroy();
  }, 60_000);

  it('loses no message, doubles no call, ends every case and keeps every ledger while a node stops and returns', async () => {
    const [lost] = cluster.nodes;
    // Every queue of the fleet is a quorum queue replicated to all three nodes.
    const queues = (JSON.parse(cluster.ctl(cluster.nodes[1]!, ['list_queues', 'name', 'type', 'members', 'online', '--formatter', 'json'])) as QueueRow[]).filter((q) => q.name.startsWith(fx.prefix));
    expect(queues.length).toBeGreaterThan(0);
    for (const q of queues) {
      expect(q.type, q.name).toBe('quorum');
      expect([...q.members].sort(), q.name).toEqual(cluster.nodes.map((n) => n.name).sort());
    }
    const connectedTo = cluster.ctl(lost!, ['list_connections', 'name', '--formatter', 'json']);
    expect((JSON.parse(connectedTo) as unknown[]).length, 'workers connect to the first node of AMQP_URL').toBeGreaterThan(0);

    const cases: { caseId: string; taskId: string }[] = [];
    const open = async (n: number) => {
      for (let i = 0; i < n; i++) cases.push(await fx.openCase('ticket', `ticket ${cases.length}`));
    };
    const done = async () => (await fx.rows<{ n: number }>("SELECT count(*)::int AS n FROM tasks WHERE state = 'done'"))[0]!.n;
    const tails = () => workers.map((w) => `${w.name}:\n${w.output().split('\n').filter((l) => !l.includes('"tool ')).slice(-25).join('\n')}`).join('\n----\n');
    const until = (probe: () => Promise<boolean>, timeoutMs: number, what: string) =>
      eventually(probe, { timeoutMs, intervalMs: 250, what }).catch((e: unknown) => {
        throw new Error(`${String(e)}\n${tails()}`);
      });

    const third = Math.floor(CASES / 3);
    await open(third);
    await until(async () => (await done()) >= 20, 60_000, 'the first cases done');
    cluster.stopApp(lost!);
    // Arrivals while the node is down: the relay publishes them through the surviving nodes, and
    // every case so far finishes before the node returns.
    await open(third);
    await until(async () => (await done()) === cases.length, 120_000, 'every case so far done with a node down');
    const failedOver = [cluster.nodes[1]!, cluster.nodes[2]!].flatMap((n) => JSON.parse(cluster.ctl(n, ['list_connections', 'name', '--formatter', 'json'])) as unknown[]);
    expect(failedOver.length, 'workers failed over to the surviving nodes').toBeGreaterThanOrEqual(workers.length);
    cluster.startApp(lost!);
    // And after it returned (it rejoins every queue as a follower).
    await open(CASES - 2 * third);

    await eventually(async () => (await done()) === cases.length, { timeoutMs: 120_000, intervalMs: 250, what: 'every case done' }).catch(async (e: unknown) => {
      const stuck = await fx.rows("SELECT id, state, park_reason, lease_owner FROM tasks WHERE state <> 'done' LIMIT 10");
      throw new Error(`${String(e)}\n${JSON.stringify(stuck)}\n${workers.map((w) => w.output().slice(-3000)).join('\n----\n')}`);
    });
    for (const w of workers) expect(w.proc.exitCode, `${w.name} alive`).toBeNull();

    // No message lost: every outbox row was confirmed by the broker, every task.runnable reached
    // the turn-worker's inbox, nothing was dead-lettered.
    // (A finished task's task.finished row is marked published once the broker confirms it, just
    // after the task is done.)
    await eventually(async () => (await fx.rows<{ n: number }>('SELECT count(*)::int AS n FROM outbox_messages WHERE published_at IS NULL'))[0]!.n === 0, {
      timeoutMs: 30_000,
      what: 'every outbox row confirmed by the broker',
    });
    const missing = await fx.rows<{ message_id: string }>(
      "SELECT o.message_id FROM outbox_messages o WHERE o.type = 'task.runnable' AND NOT EXISTS (SELECT 1 FROM inbox_messages i WHERE i.message_id = o.message_id AND i.consumer = 'turn-worker')",
    );
    expect(missing, 'task.runnable never received').toEqual([]);
    expect((await fx.rows<{ n: number }>('SELECT count(*)::int AS n FROM dead_letters'))[0]!.n).toBe(0);

    // No call doubled: one checkpoint per turn, one completed read per reading turn, each executed once.
    const cps = await fx.rows<{ task_id: string; turns: number[] }>('SELECT task_id, array_agg(turn ORDER BY turn) AS turns FROM turn_checkpoints GROUP BY task_id');
    expect(cps).toHaveLength(cases.length);
    // TURNS reading turns and the answering one.
    for (const c of cps) expect(c.turns, c.task_id).toEqual(Array.from({ length: TURNS + 1 }, (_, i) => i + 1));
    expect((await fx.rows<{ n: number }>("SELECT count(*)::int AS n FROM runtime_calls WHERE kind = 'read' AND status = 'completed'"))[0]!.n).toBe(cases.length * TURNS);
    const started = outputs.flatMap((o) => toolTrace(o())).filter((e) => e.event === 'started');
    const perCall = new Map<string, number>();
    for (const s of started) perCall.set(s.callId, (perCall.get(s.callId) ?? 0) + 1);
    expect(perCall.size).toBe(cases.length * TURNS);
    expect([...perCall].filter(([, n]) => n > 1), 'calls executed twice').toEqual([]);

    for (const c of cases) expect(await fx.store.verifyLedger(c.caseId), c.caseId).toMatchObject({ ok: true });

    // The returned node is a member of every queue again.
    await eventually(
      () => {
        const back = (JSON.parse(cluster.ctl(cluster.nodes[1]!, ['list_queues', 'name', 'online', '--formatter', 'json'])) as QueueRow[]).filter((q) => q.name.startsWith(fx.prefix));
        return back.every((q) => q.online.includes(lost!.name));
      },
      { timeoutMs: 30_000, intervalMs: 500, what: 'the returned node online in every queue' },
    );
  }, 240_000);
});
