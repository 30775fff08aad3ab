/**
 * A Postgres server of its own for fault tests: `initdb` into a scratch directory, listening on
 * 127.0.0.1 on a free port, trust authentication for `postgres`. It can be restarted (fast
 * shutdown: open transactions are terminated, as an operator's restart does) while the shared
 * server on 5432 is never touched.
 *
 * initdb and the server refuse to run as root, so as root they run as the `postgres` user
 * (`runuser`), which then owns the scratch directory.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';

const PG_BIN = process.env.PG_BIN_DIR ?? '/usr/lib/postgresql/15/bin';

export interface PgCluster {
  readonly port: number;
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  readonly url: string;
  /** `pg_ctl restart -m fast`: every connection is terminated, the server is back on return. */
  restart(): void;
  stop(): void;
  start(): void;
  destroy(): void;
}

export async function startPgCluster(): Promise<PgCluster> {
  for (const tool of ['initdb', 'pg_ctl']) {
    if (!existsSync(join(PG_BIN, tool))) throw new Error(`${join(PG_BIN, tool)} is missing: PostgreSQL server tools are required for this fault test (set PG_BIN_DIR)`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'ev-pg-'));
  const data = join(dir, 'data');
  const asRoot = process.getuid?.() === 0;
  if (asRoot) {
    const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout.trim());
    const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout.trim());
    chownSync(dir, uid, gid);
    chmodSync(dir, 0o755);
  }
  const run = (tool: string, args: readonly string[], timeoutMs = 60_000) => {
    const cmd = asRoot ? 'runuser' : join(PG_BIN, tool);
    const full = asRoot ? ['-u', 'postgres', '--', join(PG_BIN, tool), ...args] : [...args];
    const r = spawnSync(cmd, full, { encoding: 'utf8', timeout: timeoutMs, cwd: dir });
    if (r.status !== 0) throw new Error(`${tool} ${args.join(' ')} failed (${r.status ?? r.signal}): ${r.stdout}${r.stderr}`);
  };
  const port = await freePort();
  run('initdb', ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  const start = () => run('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-o', opts, '-w', '-t', '60', 'start']);
  start();
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    restart: () => run('pg_ctl', ['-D', data, '-l', join(dir, 'log'), '-o', opts, '-m', 'fast', '-w', '-t', '60', 'restart']),
    stop: () => run('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop']),
    start,
    destroy() {
      try {
        run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch {
        // not running
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
