/**
 * A RabbitMQ cluster of its own for fault tests: N nodes on this machine beside the shared broker,
 * each with its own node name (`<tag>N@localhost`), AMQP and distribution ports, data and log
 * directories, an empty plugin list and a config file of its own, joined into one cluster.
 *
 * Invariants:
 * - The shared node is never touched: every command names its own node (`-n`), and the nodes
 *   share an Erlang cookie of their own (HOME points at a scratch directory holding it), so a
 *   mistyped node name cannot reach the shared broker at all.
 * - The server is started from /usr/lib/rabbitmq/bin directly (the /usr/sbin wrapper switches to
 *   the rabbitmq user, whose cookie is the shared node's), in the foreground as our child, so
 *   `destroy` can always take it down by its pid.
 * - A missing rabbitmq-server or rabbitmqctl fails loudly: a fault test that silently ran
 *   against nothing would prove nothing.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { freePort } from './ports.js';

const BIN = process.env.RABBITMQ_BIN_DIR ?? '/usr/lib/rabbitmq/bin';

export interface RabbitNode {
  readonly name: string;
  readonly amqpPort: number;
  readonly url: string;
}

export interface RabbitCluster {
  readonly nodes: readonly RabbitNode[];
  /** Every node's URL, comma-separated: what AMQP_URL takes for failover. */
  readonly url: string;
  /** `rabbitmqctl -n <node> args…`; throws with its output on a non-zero exit. */
  ctl(node: RabbitNode, args: readonly string[], timeoutMs?: number): string;
  /** Stops the RabbitMQ application on `node` (the Erlang VM stays up, as `stop_app` does). */
  stopApp(node: RabbitNode): void;
  startApp(node: RabbitNode): void;
  /** SIGKILLs the node's VM (a machine lost), then `restart` brings it back with its data. */
  kill(node: RabbitNode): Promise<void>;
  restart(node: RabbitNode): Promise<void>;
  /** Kills every node and removes every directory. */
  destroy(): Promise<void>;
}

export function requireRabbitTools(): void {
  for (const tool of ['rabbitmq-server', 'rabbitmqctl']) {
    if (!existsSync(join(BIN, tool))) throw new Error(`${join(BIN, tool)} is missing: RabbitMQ server tools are required for this fault test (set RABBITMQ_BIN_DIR)`);
  }
}

export async function startRabbitCluster(opts: { size: number; tag?: string; log?: (line: string) => void }): Promise<RabbitCluster> {
  requireRabbitTools();
  const tag = opts.tag ?? `evc${randomBytes(2).toString('hex')}`;
  const root = mkdtempSync(join(tmpdir(), `ev-rabbit-${tag}-`));
  const home = join(root, 'home');
  mkdirSync(home);
  writeFileSync(join(home, '.erlang.cookie'), randomBytes(20).toString('hex').toUpperCase());
  chmodSync(join(home, '.erlang.cookie'), 0o400);
  writeFileSync(join(root, 'enabled_plugins'), '[].\n');
  writeFileSync(join(root, 'rabbitmq-env.conf'), '');
  const nodes: (RabbitNode & { env: NodeJS.ProcessEnv })[] = [];
  for (let i = 1; i <= opts.size; i++) {
    const name = `${tag}${i}@localhost`;
    const amqpPort = await freePort();
    const distPort = await freePort();
    const dir = join(root, `n${i}`);
    mkdirSync(join(dir, 'log'), { recursive: true });
    mkdirSync(join(dir, 'mnesia'), { recursive: true });
    // Only the shape a test needs; resource thresholds low enough for a busy shared machine.
    writeFileSync(
      join(dir, 'rabbitmq.conf'),
      [`listeners.tcp.default = 127.0.0.1:${amqpPort}`, 'loopback_users.guest = true', 'heartbeat = 30', 'disk_free_limit.absolute = 50MB', 'log.console = false', 'log.file.level = warning', ''].join('\n'),
    );
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      HOME: home,
      RABBITMQ_NODENAME: name,
      RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
      RABBITMQ_NODE_PORT: String(amqpPort),
      RABBITMQ_DIST_PORT: String(distPort),
      RABBITMQ_MNESIA_BASE: join(dir, 'mnesia'),
      RABBITMQ_LOG_BASE: join(dir, 'log'),
      RABBITMQ_ENABLED_PLUGINS_FILE: join(root, 'enabled_plugins'),
      RABBITMQ_CONFIG_FILE: join(dir, 'rabbitmq.conf'),
      RABBITMQ_CONF_ENV_FILE: join(root, 'rabbitmq-env.conf'),
      ERL_EPMD_ADDRESS: '127.0.0.1',
    };
    nodes.push({ name, amqpPort, url: `amqp://guest:guest@127.0.0.1:${amqpPort}`, env });
  }
  const procs = new Map<string, ChildProcess>();
  const log = opts.log ?? (() => {});

  const ctl = (node: RabbitNode, args: readonly string[], timeoutMs = 60_000): string => {
    const env = nodes.find((n) => n.name === node.name)!.env;
    const r = spawnSync(join(BIN, 'rabbitmqctl'), ['-n', node.name, ...args], { env, encoding: 'utf8', timeout: timeoutMs });
    if (r.status !== 0) throw new Error(`rabbitmqctl -n ${node.name} ${args.join(' ')} failed (${r.status ?? r.signal}): ${r.stdout}${r.stderr}`);
    return r.stdout;
  };

  const boot = async (node: RabbitNode & { env: NodeJS.ProcessEnv }) => {
    const proc = spawn(join(BIN, 'rabbitmq-server'), [], { env: node.env, stdio: ['ignore', 'ignore', 'pipe'], detached: false });
    let err = '';
    proc.stderr!.on('data', (b: Buffer) => (err = (err + b.toString()).slice(-4000)));
    procs.set(node.name, proc);
    // await_startup fails at once while the VM has not registered with epmd yet: poll it.
    const deadline = Date.now() + 120_000;
    for (;;) {
      await new Promise((r) => setTimeout(r, 1000));
      if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`rabbit node ${node.name} exited during start: ${err}`);
      try {
        ctl(node, ['await_startup', '--timeout', '60'], 70_000);
        break;
      } catch (e) {
        if (Date.now() > deadline) throw new Error(`${String(e)}\n${err}`, { cause: e });
      }
    }
    log(`rabbit node ${node.name} up on ${node.amqpPort}`);
  };

  const cluster: RabbitCluster = {
    nodes,
    url: nodes.map((n) => n.url).join(','),
    ctl,
    stopApp(node) {
      ctl(node, ['stop_app']);
      log(`rabbit node ${node.name}: stop_app`);
    },
    startApp(node) {
      ctl(node, ['start_app'], 100_000);
      log(`rabbit node ${node.name}: start_app`);
    },
    async kill(node) {
      const p = procs.get(node.name);
      if (!p || p.exitCode !== null || p.signalCode !== null) return;
      const gone = new Promise((r) => p.once('exit', r));
      killTree(p);
      await gone;
      log(`rabbit node ${node.name}: killed`);
    },
    async restart(node) {
      await cluster.kill(node);
      await boot(nodes.find((n) => n.name === node.name)!);
    },
    async destroy() {
      for (const p of procs.values()) {
        if (p.exitCode === null && p.signalCode === null) {
          const gone = new Promise((r) => p.once('exit', r));
          killTree(p);
          await Promise.race([gone, new Promise((r) => setTimeout(r, 5000))]);
        }
      }
      rmSync(root, { recursive: true, force: true });
    },
  };

  try {
    await Promise.all(nodes.map(boot));
    const [first, ...rest] = nodes;
    for (const n of rest) {
      ctl(n, ['stop_app']);
      ctl(n, ['join_cluster', first!.name]);
      ctl(n, ['start_app'], 100_000);
    }
    const status = ctl(first!, ['cluster_status', '--formatter', 'json']);
    const running = (JSON.parse(status) as { running_nodes: string[] }).running_nodes;
    if (running.length !== nodes.length) throw new Error(`cluster formed with ${running.length} of ${nodes.length} nodes running: ${status}`);
  } catch (err) {
    await cluster.destroy();
    throw err;
  }
  return cluster;
}

/**
 * The VM runs under the rabbitmq-server shell script (and erl_child_setup beside it): SIGKILL
 * the script's process group is not ours to take, so kill the beam children by parent pid first.
 */
function killTree(p: ChildProcess): void {
  if (p.pid === undefined) return;
  const children = spawnSync('pgrep', ['-P', String(p.pid)], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).map(Number);
  for (const c of children) {
    for (const g of spawnSync('pgrep', ['-P', String(c)], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).map(Number)) {
      try {
        process.kill(g, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    try {
      process.kill(c, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  p.kill('SIGKILL');
}
