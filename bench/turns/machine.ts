/**
 * What the machine itself gives at the moment of a run (the `machine` line of `bench:turns`):
 * the speed of each CPU and the latency of a synchronous commit. On the 2-vCPU machine the goals
 * are measured on, both drift with the host's other tenants — one vCPU measured 1.7× slower than
 * the other for minutes at a time, and fdatasync's p99 under load rose from 1 to 8 ms — and
 * half-load latency follows them, so the figures of a run are read beside its machine line.
 *
 *   cpu_chunk_ms: per CPU (pinned with `taskset`), the median time of one fixed chunk of integer
 *                 work over 1 s — equal numbers mean equal CPUs; null where `taskset` is missing;
 *   commit_ms_p50/p99: round trip of a one-row INSERT committed synchronously, 300 times.
 */
import { spawnSync } from 'node:child_process';
import { cpus } from 'node:os';
import pg from 'pg';

/** One second of fixed chunks of integer work; prints the median chunk time in ms. */
const SPIN = `
const times = [];
const end = performance.now() + 1000;
let sink = 0;
while (performance.now() < end) {
  const t = performance.now();
  for (let i = 0; i < 2e6; i++) sink = (sink + i * i) | 0;
  times.push(performance.now() - t);
}
times.sort((a, b) => a - b);
console.log(JSON.stringify({ ms: times[times.length >> 1], sink }));
`;

function cpuChunkMs(cpu: number): number | null {
  const r = spawnSync('taskset', ['-c', String(cpu), process.execPath, '-e', SPIN], { encoding: 'utf8', timeout: 10_000 });
  if (r.status !== 0) return null;
  try {
    return +(JSON.parse(r.stdout) as { ms: number }).ms.toFixed(2);
  } catch {
    return null;
  }
}

async function commitLatency(databaseUrl: string, n: number): Promise<{ p50: number; p99: number }> {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'bench-machine-probe' });
  await client.connect();
  const table = `ev_bench_probe_${process.pid}`;
  try {
    await client.query(`CREATE TABLE IF NOT EXISTS ${table} (n int)`);
    const ms: number[] = [];
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      await client.query(`INSERT INTO ${table} VALUES ($1)`, [i]);
      ms.push(performance.now() - t);
    }
    ms.sort((a, b) => a - b);
    return { p50: +ms[Math.floor(n / 2)]!.toFixed(2), p99: +ms[Math.floor(n * 0.99)]!.toFixed(2) };
  } finally {
    await client.query(`DROP TABLE IF EXISTS ${table}`).catch(() => {});
    await client.end();
  }
}

export async function probeMachine(databaseUrl: string, when: 'before' | 'after'): Promise<Record<string, unknown>> {
  const perCpu = Array.from({ length: cpus().length }, (_, i) => cpuChunkMs(i));
  const commit = await commitLatency(databaseUrl, 300);
  return { phase: 'machine', when, cpu_chunk_ms: perCpu, commit_ms_p50: commit.p50, commit_ms_p99: commit.p99 };
}
