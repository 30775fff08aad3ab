/**
 * A private Dovecot IMAP server for one test file: generated config in a temp dir, maildir in
 * the same dir, one passwd-file user with a plain password, plaintext auth over 127.0.0.1 on a
 * free port, no system-wide config (`dovecot -F -c <conf>`). Started as a child process and
 * stopped by the test; `stop()` + `start()` on the same instance restarts it on the same port
 * with the same mail, which is how the tests make "the server goes away and comes back".
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import net from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { readinessBudgetMs, requireTool, freePort } from '@everdict/testkit';

/** The dovecot binary (PATH, then the sbin folders Debian installs it in), or a clear failure. */
export function dovecotBinary(): string {
  return requireTool('dovecot', { debianPackage: 'dovecot-imapd', extraDirs: ['/usr/sbin', '/usr/local/sbin'] });
}

/** Signals the process group this file started (never anything else); a gone group is fine. */
function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}


async function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

export interface DovecotServer {
  host: string;
  port: number;
  user: string;
  pass: string;
  dir: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Stops the server for good and removes the temp dir. */
  destroy(): Promise<void>;
  log(): string;
}

export async function startDovecot(label: string): Promise<DovecotServer> {
  const binary = dovecotBinary();
  const dir = mkdtempSync(path.join(tmpdir(), `everdict-dovecot-${label}-`));
  // Login processes run as an unprivileged user and must traverse into base_dir.
  chmodSync(dir, 0o755);
  const port = await freePort();
  const user = 'support';
  const pass = 'test-password-not-secret';
  const isRoot = process.getuid?.() === 0;
  const me = userInfo();
  // Dovecot refuses mail access as uid 0, so as root the mail user is nobody.
  const mailUid = isRoot ? 65534 : me.uid;
  const mailGid = isRoot ? 65534 : me.gid;
  for (const sub of ['mail', 'home']) {
    mkdirSync(path.join(dir, sub));
    if (isRoot) chownSync(path.join(dir, sub), mailUid, mailGid);
  }
  const passwd = path.join(dir, 'passwd');
  writeFileSync(passwd, `${user}:{PLAIN}${pass}::::::\n`, { mode: 0o644 });
  const logFile = path.join(dir, 'dovecot.log');
  const conf = path.join(dir, 'dovecot.conf');
  writeFileSync(
    conf,
    [
      `base_dir = ${dir}/run`,
      `state_dir = ${dir}/state`,
      `instance_name = everdict-${path.basename(dir)}`,
      'protocols = imap',
      'listen = 127.0.0.1',
      'ssl = no',
      'disable_plaintext_auth = no',
      'auth_mechanisms = plain login',
      `log_path = ${logFile}`,
      `info_log_path = ${logFile}`,
      `mail_location = maildir:${dir}/mail/%u`,
      `default_login_user = ${isRoot ? 'dovenull' : me.username}`,
      `default_internal_user = ${isRoot ? 'dovecot' : me.username}`,
      // Without inotify Dovecot re-checks an IDLEing mailbox at this interval.
      'mailbox_idle_check_interval = 1 secs',
      'shutdown_clients = yes',
      'namespace inbox {',
      '  inbox = yes',
      '}',
      'passdb {',
      '  driver = passwd-file',
      `  args = scheme=PLAIN username_format=%u ${passwd}`,
      '}',
      'userdb {',
      '  driver = static',
      `  args = uid=${mailUid} gid=${mailGid} home=${dir}/home/%u`,
      '}',
      'service imap-login {',
      '  inet_listener imap {',
      '    address = 127.0.0.1',
      `    port = ${port}`,
      '  }',
      '  inet_listener imaps {',
      '    port = 0',
      '  }',
      '}',
      '',
    ].join('\n'),
  );

  let child: ChildProcess | null = null;
  let stderr = '';

  const server: DovecotServer = {
    host: '127.0.0.1',
    port,
    user,
    pass,
    dir,
    async start() {
      if (child !== null) return;
      // detached: the master leads its own process group, so stop() can end its children too.
      const proc = spawn(binary, ['-F', '-c', conf], { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
      child = proc;
      proc.stderr?.on('data', (d: Buffer) => {
        stderr += d.toString('utf8');
      });
      const deadline = Date.now() + readinessBudgetMs(15_000);
      for (;;) {
        if (proc.exitCode !== null) throw new Error(`dovecot exited with ${proc.exitCode}: ${stderr}\n${server.log()}`);
        if (await portOpen(port)) return;
        if (Date.now() > deadline) throw new Error(`dovecot did not listen on ${port}: ${stderr}\n${server.log()}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop() {
      const proc = child;
      if (proc === null) return;
      child = null;
      const group = proc.pid;
      if (proc.exitCode === null && group !== undefined) {
        const exited = new Promise<void>((r) => proc.once('exit', () => r()));
        signalGroup(group, 'SIGTERM');
        const timer = setTimeout(() => signalGroup(group, 'SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      }
      // A session process in IDLE can outlive its master by seconds; the server is "gone" only
      // when every process of the instance is, so the rest of the group is killed outright.
      if (group !== undefined) signalGroup(group, 'SIGKILL');
      const deadline = Date.now() + 5_000;
      while ((await portOpen(port)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    },
    async destroy() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
    log() {
      return existsSync(logFile) ? readFileSync(logFile, 'utf8') : '';
    },
  };
  await server.start();
  return server;
}

export { freePort };
