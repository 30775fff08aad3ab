/**
 * `npm run soak -- --minutes N` — load under faults, then an audit. NOT a test: it prints JSON
 * figures (one line per fault while running, the audit at the end) and exits 1 when a count
 * that must be zero is not.
 *
 * Everything it breaks is its own: a Postgres server initdb'd into a scratch directory on a free
 * port, and a RabbitMQ cluster of SOAK_BROKER_NODES (default 3) nodes with their own names and
 * ports (testkit's pgCluster / rabbitCluster). The shared Postgres on 5432 and the shared broker
 * are never touched. SOAK_WORKERS (default 2) turn-worker processes (`everdict start`, from
 * source) get AMQP_URL listing every node. Cases of a scripted agent (SOAK_TURNS reads, then an
 * answer) arrive at SOAK_RATE per second for N minutes while, every SOAK_FAULT_EVERY_S seconds
 * (default 12, jittered), one fault strikes at random:
 *   kill      SIGKILL a worker; a replacement starts at once
 *   broker    SIGKILL one broker node's VM and boot it again (its data kept)
 *   broker_app  `rabbitmqctl stop_app` on one node, `start_app` a few seconds later
 *   postgres  `pg_ctl restart -m fast` (open transactions terminated)
 * A worker that exits on its own (not killed by the soak) is counted as `unexpected_exits` and
 * restarted. After the load, faults stop and the fleet drains (SOAK_DRAIN_S, default 180).
 *
 * The audit, over every case the load generator saw committed:
 *   unfinished  tasks not `done`
 *   lost        task.runnable messages never confirmed by the broker, or confirmed and never in
 *               the turn-worker's inbox, plus dead-lettered messages
 *   duplicated  turns with more than one checkpoint or missing ones, completed reads beyond one
 *               per turn, and executions of a read after that read had completed (an execution
 *               of a read whose worker died before completing it is allowed: reads are
 *               at-least-once until their result is journalled)
 *   ledger_failures  cases whose ledger does not verify
 */
import { recordStream, toolTrace } from '../libs/testkit/src/toolTrace.js';
import { startPgCluster } from '../libs/testkit/src/pgCluster.js';
import { startRabbitCluster } from '../libs/testkit/src/rabbitCluster.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const MINUTES = Number(arg('minutes') ?? process.env.SOAK_MINUTES ?? 2);
const RATE = Number(process.env.SOAK_RATE ?? 4);
const WORKERS = Number(process.env.SOAK_WORKERS ?? 2);
const BROKER_NODES = Number(process.env.SOAK_BROKER_NODES ?? 3);
const TURNS = Number(process.env.SOAK_TURNS ?? 3);
const FAULT_EVERY_S = Number(process.env.SOAK_FAULT_EVERY_S ?? 12);
const DRAIN_S = Number(process.env.SOAK_DRAIN_S ?? 180);
if (!(MINUTES > 0)) throw new Error(`--minutes must be a positive number, got ${arg('minutes')}`);

const print = (o: Record<string, unknown>) => console.log(JSON.stringify(o));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const t0 = Date.now();
const elapsed = () => +((Date.now() - t0) / 1000).toFixed(1);

const pgServer = await startPgCluster();
const cluster = await startRabbitCluster({ size: BROKER_NODES, tag: `soak${process.pid % 10000}` });
// The fixture (test/turns/helpers) reads these when it is first imported.
process.env.TEST_DATABASE_URL = pgServer.url;
process.env.TEST_AMQP_URL = cluster.nodes[0]!.url;
const { call, say, testConfig, turnsFixture } = await import('../test/turns/helpers.js');
type WorkerProc = Awaited<ReturnType<Awaited<ReturnType<typeof turnsFixture>>['worker']>>;

let exitCode = 0;
let fx: Awaited<ReturnType<typeof turnsFixture>> | undefined;
const cleanup = async () => {
  await fx?.close().catch(() => {});
  await cluster.destroy().catch(() => {});
  pgServer.destroy();
};
try {
  fx = await turnsFixture(
    'soak',
    testConfig({
      routes: { main: 'main.json' },
      profiles: { agent: { version: '1', route: 'main', prompt: 'You answer tickets.', tools: ['lookup'] } },
      runtime: { leaseTtlMs: 3000, sweepIntervalMs: 500, prefetch: 64 },
    }),
  );
  const f = fx;
  f.writeScript('main', [...Array.from({ length: TURNS }, (_, i) => call(['lookup', { page: i }])), say('resolved')]);

  const outputs: (() => string)[] = [];
  const live = new Set<WorkerProc>();
  const killed = new Set<WorkerProc>();
  const counts = { cases_opened: 0, open_retries: 0, kills: 0, broker_kills: 0, broker_app_restarts: 0, postgres_restarts: 0, unexpected_exits: 0 };
  let seq = 0;
  let stopping = false;
  const spawnWorker = async (): Promise<void> => {
    const name = `soak-w${seq++}`;
    for (let attempt = 0; ; attempt++) {
      try {
        const w = await f.worker(name, { AMQP_URL: cluster.url, LOG_LEVEL: 'debug' });
        outputs.push(recordStream(w.proc.stdout!, w.output()));
        live.add(w);
        void w.exited.then((how) => {
          live.delete(w);
          if (stopping) return;
          if (!killed.has(w)) {
            counts.unexpected_exits++;
            print({ at: elapsed(), event: 'unexpected_exit', worker: name, code: how.code, signal: how.signal, tail: w.output().slice(-1500) });
          }
          void spawnWorker();
        });
        return;
      } catch (err) {
        // A start during a fault (Postgres restarting) may time out: try again.
        if (attempt >= 5) throw err;
        await sleep(2000);
      }
    }
  };
  await Promise.all(Array.from({ length: WORKERS }, spawnWorker));
  print({ at: elapsed(), event: 'ready', workers: WORKERS, broker_nodes: BROKER_NODES, minutes: MINUTES, rate_per_s: RATE, turns: TURNS });

  const cases: { caseId: string; taskId: string }[] = [];
  const loadUntil = Date.now() + MINUTES * 60_000;
  const load = (async () => {
    const gap = 1000 / RATE;
    let next = Date.now();
    while (Date.now() < loadUntil) {
      next += gap;
      try {
        cases.push(await f.openCase('ticket', `soak ticket ${cases.length}`));
        counts.cases_opened++;
      } catch {
        // Postgres down or restarting: this arrival did not commit; the next one retries.
        counts.open_retries++;
        await sleep(500);
      }
      const wait = next - Date.now();
      if (wait > 0) await sleep(wait);
      else next = Date.now();
    }
  })();

  const faults = (async () => {
    const kinds = ['kill', 'broker', 'broker_app', 'postgres'] as const;
    // Rounds of every kind once, each round in random order, so a short soak still sees each.
    let round: (typeof kinds)[number][] = [];
    while (Date.now() < loadUntil - 5000) {
      await sleep(FAULT_EVERY_S * 1000 * (0.5 + Math.random()));
      if (Date.now() >= loadUntil - 5000) break;
      if (round.length === 0) round = [...kinds].sort(() => Math.random() - 0.5);
      const kind = round.pop()!;
      const node = cluster.nodes[Math.floor(Math.random() * cluster.nodes.length)]!;
      try {
        if (kind === 'kill') {
          const victims = [...live];
          const w = victims[Math.floor(Math.random() * victims.length)];
          if (!w) continue;
          killed.add(w);
          w.signal('SIGKILL');
          counts.kills++;
          print({ at: elapsed(), event: 'kill', worker: w.name });
        } else if (kind === 'broker') {
          print({ at: elapsed(), event: 'broker_kill', node: node.name });
          await cluster.restart(node);
          counts.broker_kills++;
          print({ at: elapsed(), event: 'broker_back', node: node.name });
        } else if (kind === 'broker_app') {
          cluster.stopApp(node);
          print({ at: elapsed(), event: 'broker_stop_app', node: node.name });
          await sleep(3000 + Math.random() * 4000);
          cluster.startApp(node);
          counts.broker_app_restarts++;
          print({ at: elapsed(), event: 'broker_start_app', node: node.name });
        } else {
          pgServer.restart();
          counts.postgres_restarts++;
          print({ at: elapsed(), event: 'postgres_restart' });
        }
      } catch (err) {
        print({ at: elapsed(), event: 'fault_failed', kind, err: String(err).slice(0, 500) });
      }
    }
  })();

  await Promise.all([load, faults]);
  print({ at: elapsed(), event: 'load_done', cases: cases.length });

  // Drain: wait until every case's task is done (or the drain time is up).
  const drainUntil = Date.now() + DRAIN_S * 1000;
  const q = async <R>(text: string, values: unknown[] = []): Promise<R[]> => {
    for (let i = 0; ; i++) {
      try {
        return await f.rows<R>(text, values);
      } catch (err) {
        if (i > 20) throw err;
        await sleep(500);
      }
    }
  };
  const ids = cases.map((c) => c.taskId);
  let unfinished = ids.length;
  while (Date.now() < drainUntil) {
    unfinished = (await q<{ n: number }>("SELECT count(*)::int AS n FROM tasks WHERE id = ANY($1::uuid[]) AND state <> 'done'", [ids]))[0]!.n;
    if (unfinished === 0) break;
    await sleep(1000);
  }
  const drainedAt = elapsed();
  await sleep(2000); // let the last inbox rows and publishes settle
  stopping = true;

  const caseIds = cases.map((c) => c.caseId);
  const unpublished = (await q<{ n: number }>("SELECT count(*)::int AS n FROM outbox_messages WHERE type = 'task.runnable' AND published_at IS NULL AND case_id = ANY($1::uuid[])", [caseIds]))[0]!.n;
  const neverReceived = (
    await q<{ n: number }>(
      "SELECT count(*)::int AS n FROM outbox_messages o WHERE o.type = 'task.runnable' AND o.published_at IS NOT NULL AND o.case_id = ANY($1::uuid[]) AND NOT EXISTS (SELECT 1 FROM inbox_messages i WHERE i.message_id = o.message_id AND i.consumer = 'turn-worker')",
      [caseIds],
    )
  )[0]!.n;
  const deadLetters = (await q<{ n: number }>('SELECT count(*)::int AS n FROM dead_letters'))[0]!.n;

  const badCheckpoints = (
    await q<{ n: number }>(
      `SELECT count(*)::int AS n FROM tasks t
        WHERE t.id = ANY($1::uuid[]) AND t.state = 'done'
          AND (SELECT array_agg(turn ORDER BY turn) FROM turn_checkpoints c WHERE c.task_id = t.id) IS DISTINCT FROM $2::int[]`,
      [ids, Array.from({ length: TURNS + 1 }, (_, i) => i + 1)], // the reading turns and the answer
    )
  )[0]!.n;
  const extraReads = (
    await q<{ n: number }>(
      "SELECT COALESCE(sum(n - 1), 0)::int AS n FROM (SELECT count(*)::int AS n FROM runtime_calls WHERE kind = 'read' AND status = 'completed' AND task_id = ANY($1::uuid[]) GROUP BY task_id, turn, ordinal) x WHERE n > 1",
      [ids],
    )
  )[0]!.n;
  const started = outputs.flatMap((o) => toolTrace(o())).filter((e) => e.event === 'started');
  const completed = new Map(
    (await q<{ id: string; completed_at: Date | null }>("SELECT id, completed_at FROM runtime_calls WHERE status = 'completed' AND id = ANY($1::uuid[])", [[...new Set(started.map((s) => s.callId))]])).map((r) => [r.id, r.completed_at]),
  );
  const readAfterCompleted = started.filter((s) => {
    const at = completed.get(s.callId);
    return at != null && s.at > at.getTime() + 1;
  }).length;
  const reexecutedBeforeCompletion = started.length - new Set(started.map((s) => s.callId)).size;

  let ledgerFailures = 0;
  for (const c of cases) {
    for (let i = 0; ; i++) {
      try {
        if (!(await f.store.verifyLedger(c.caseId)).ok) ledgerFailures++;
        break;
      } catch (err) {
        if (i > 10) throw err;
        await sleep(500);
      }
    }
  }

  const result = {
    summary: 'soak',
    minutes: MINUTES,
    seconds: elapsed(),
    drained_at_s: drainedAt,
    ...counts,
    lost: unpublished + neverReceived + deadLetters,
    duplicated: badCheckpoints + extraReads + readAfterCompleted,
    unfinished,
    ledger_failures: ledgerFailures,
    detail: { reads_executed: started.length, reads_expected: cases.length * TURNS, unpublished, never_received: neverReceived, dead_letters: deadLetters, bad_checkpoints: badCheckpoints, extra_completed_reads: extraReads, read_after_completed: readAfterCompleted, reads_reexecuted_before_completion: reexecutedBeforeCompletion },
  };
  print(result);
  if (result.lost + result.duplicated + result.unfinished + result.ledger_failures + counts.unexpected_exits > 0) exitCode = 1;
} catch (err) {
  print({ summary: 'soak', error: String(err instanceof Error ? (err.stack ?? err.message) : err).slice(0, 4000) });
  exitCode = 2;
} finally {
  await cleanup();
}
process.exit(exitCode);
