/**
 * `npm run bench:inbox` — what a delivery's inbox row costs its unit of work, on ONE connection
 * with nothing else running (not a test).
 *
 * Each unit of work is the smallest a consumer commits: one row UPDATE. `inbox` runs it through
 * `Store.unitOfWorkOnInbox` (the path of a delivery consumed alone: its inbox row first, sent with
 * BEGIN), `plain` through `Store.unitOfWork` — the same store path, only the inbox row left out.
 * Prints server CPU (the backend's utime+stime from /proc, so the server must be local) and this
 * process's CPU per unit of work, and the inbox's share of their sum.
 *
 * Why beside bench:bus: there the inbox's overhead is read from the rate of a whole pipeline
 * (producers, relay, RabbitMQ, two consumers), whose pairs spread over 15 points on this shared
 * host. Here the modes alternate in ROUNDS short rounds and the figure is the median of the
 * rounds' paired differences, so it tells whether a change made the inbox row itself cheaper.
 *
 * Env: UNITS (units of work per mode and round, 3000), ROUNDS (21), TEST_DATABASE_URL.
 */
import { createHash } from 'node:crypto';
import { newId } from '@everdict/contracts';
import { freshDatabase, positiveEnv, processCpuMs } from '@everdict/testkit';
import type { Sql } from '../src/db.js';
import { migrate } from '../src/migrate.js';
import { createPgDb } from '../src/pg.js';
import { Store } from '../src/store.js';

const UNITS = positiveEnv('UNITS', 3000);
const ROUNDS = positiveEnv('ROUNDS', 21);
const ROWS = 10_000;
const WARMUP = 500;

type Mode = 'inbox' | 'plain';
interface Cost {
  readonly serverUs: number;
  readonly nodeUs: number;
}

const info = await freshDatabase('bench inbox');
// One connection: every unit of work runs on the backend whose CPU is read.
const db = createPgDb(info.url, { max: 1, applicationName: 'everdict-bench' });
try {
  await migrate(db);
  await db.query({ text: 'CREATE TABLE bench_rows (id uuid PRIMARY KEY, n bigint NOT NULL DEFAULT 0)' });
  const rowIds = Array.from({ length: ROWS }, () => newId());
  await db.query({ text: 'INSERT INTO bench_rows (id) SELECT unnest($1::uuid[])', values: [rowIds] });
  const store = new Store(db);
  const pid = (await db.query<{ pid: number }>({ text: 'SELECT pg_backend_pid() AS pid' })).rows[0]!.pid;

  // Message ids and payload hashes are made before any clock runs: a consumer receives them.
  const deliveries = Array.from({ length: WARMUP + UNITS * ROUNDS }, (_, i) => ({
    messageId: newId(),
    payloadHash: `sha256:${createHash('sha256').update(`bench ${i}`).digest('hex')}`,
  }));
  let delivered = 0;
  let touched = 0;
  const update = (): Sql => ({ name: 'bench_inbox_update', text: 'UPDATE bench_rows SET n = n + 1 WHERE id = $1::uuid', values: [rowIds[touched++ % ROWS]] });

  const unit: Record<Mode, () => Promise<void>> = {
    inbox: async () => {
      const d = deliveries[delivered++]!;
      const done = await store.unitOfWorkOnInbox({ consumer: 'bench', messageId: d.messageId, payloadHash: d.payloadHash, type: 'bench.message', disposition: 'applied' }, (uow) => uow.query(update()));
      if (done.kind !== 'new') throw new Error(`delivery ${d.messageId} settled as ${done.kind}`);
    },
    plain: async () => {
      await store.unitOfWork((uow) => uow.query(update()));
    },
  };

  const measure = async (mode: Mode, units: number): Promise<Cost> => {
    const server0 = processCpuMs(pid);
    const node0 = process.cpuUsage();
    for (let i = 0; i < units; i++) await unit[mode]();
    const node = process.cpuUsage(node0);
    const server1 = processCpuMs(pid);
    if (server0 === undefined || server1 === undefined) throw new Error(`cannot read /proc/${pid}/stat: the server must run on this machine`);
    return { serverUs: ((server1 - server0) * 1000) / units, nodeUs: (node.user + node.system) / units };
  };

  // Warm-up, unmeasured: prepared statements, the tables' pages, JIT.
  await measure('inbox', WARMUP / 2);
  await measure('plain', WARMUP / 2);
  delivered = WARMUP;

  const rounds: Record<Mode, Cost>[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    const order: Mode[] = r % 2 === 0 ? ['inbox', 'plain'] : ['plain', 'inbox'];
    const got = {} as Record<Mode, Cost>;
    for (const mode of order) got[mode] = await measure(mode, UNITS);
    rounds.push(got);
  }

  const median = (xs: number[]): number => {
    const s = [...xs].sort((a, b) => a - b);
    const m = s.length >> 1;
    return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
  };
  const oneDecimal = (x: number) => Math.round(x * 10) / 10;
  const plainServer = median(rounds.map((r) => r.plain.serverUs));
  const plainNode = median(rounds.map((r) => r.plain.nodeUs));
  const extraServer = median(rounds.map((r) => r.inbox.serverUs - r.plain.serverUs));
  const extraNode = median(rounds.map((r) => r.inbox.nodeUs - r.plain.nodeUs));
  console.log(
    JSON.stringify({
      system: 'everdict-inbox',
      node: process.version,
      units_per_round: UNITS,
      rounds: ROUNDS,
      plain_server_us_per_unit: oneDecimal(plainServer),
      plain_node_us_per_unit: oneDecimal(plainNode),
      inbox_server_us_per_unit: oneDecimal(extraServer),
      inbox_node_us_per_unit: oneDecimal(extraNode),
      inbox_cpu_overhead_pct: oneDecimal(((extraServer + extraNode) / (plainServer + plainNode)) * 100),
      round_server_us: rounds.map((r) => oneDecimal(r.inbox.serverUs - r.plain.serverUs)),
    }),
  );
} finally {
  await db.close();
  await info.drop();
}
