/**
 * CPU time of local processes, read from /proc (benchmarks only: the server must run on this
 * machine). Throughput on a shared 2-core machine swings with whatever else runs; the CPU a
 * unit of work costs is the steadier figure.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

let ticksPerSecond: number | undefined;

/** USER_HZ, the unit of /proc/<pid>/stat's utime and stime. */
function clockTicks(): number {
  ticksPerSecond ??= Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
  return ticksPerSecond;
}

/** CPU time (user + system) process `pid` has used, in ms; undefined once it is gone. */
export function processCpuMs(pid: number): number | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // The command name, in parentheses, may itself hold spaces and parentheses: fields follow the last ')'.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / clockTicks();
}

/** A way to run one SQL query (a pool, a client, a store's Db). */
interface Querier {
  query<R>(q: { text: string; values?: unknown[] }): Promise<{ rows: R[] }>;
}

/**
 * CPU spent by the Postgres backends of database `dbName` between snapshots: `take()` records
 * each backend's CPU time so far (keeping the highest seen), `ms()` sums what every backend
 * used since the first snapshot it appeared in (from zero for one that connected later). A
 * backend that exits between two snapshots loses what it used after the earlier one.
 */
export function backendCpu(db: Querier, dbName: string): { take(): Promise<void>; ms(): number } {
  const first = new Map<number, number>();
  const last = new Map<number, number>();
  let snapshots = 0;
  return {
    async take() {
      const { rows } = await db.query<{ pid: number }>({ text: 'SELECT pid FROM pg_stat_activity WHERE datname = $1', values: [dbName] });
      for (const { pid } of rows) {
        const ms = processCpuMs(pid);
        if (ms === undefined) continue;
        if (!first.has(pid)) first.set(pid, snapshots === 0 ? ms : 0);
        if (ms > (last.get(pid) ?? 0)) last.set(pid, ms);
      }
      snapshots++;
    },
    ms: () => [...last].reduce((sum, [pid, ms]) => sum + ms - (first.get(pid) ?? 0), 0),
  };
}
