/**
 * Per-test broker users on the shared RabbitMQ (rabbitmqctl, as root): each with a random
 * password and exactly the permissions given, created in ONE `import_definitions` and deleted by
 * `remove()`. Names carry the test's prefix, so two test files never share a user and nothing
 * another test created is touched. Only the users named here are deleted.
 *
 * Passwords never leave the process except as the broker's salted hash
 * (rabbit_password_hashing_sha256: base64(salt ‖ sha256(salt ‖ password))), in a temp file
 * removed right after the import.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const CTL = process.env.RABBITMQCTL ?? 'rabbitmqctl';

export interface BrokerUserSpec {
  readonly name: string;
  readonly configure: string;
  readonly write: string;
  readonly read: string;
  readonly topic?: { readonly exchange: string; readonly write: string; readonly read: string };
}

export interface BrokerUsers {
  /** user name → password. */
  readonly passwords: Readonly<Record<string, string>>;
  /** Deletes every user created here (idempotent). */
  remove(): Promise<void>;
}

function ctl(args: readonly string[]): string {
  const r = spawnSync(CTL, ['-q', ...args], { encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`${CTL} ${args[0]} failed (${r.status ?? r.signal}): ${(r.stderr || r.stdout || String(r.error ?? '')).trim()}`);
  return r.stdout;
}

/** RabbitMQ's salted SHA-256 password hash. */
export function rabbitPasswordHash(password: string): string {
  const salt = randomBytes(4);
  const digest = createHash('sha256').update(Buffer.concat([salt, Buffer.from(password, 'utf8')])).digest();
  return Buffer.concat([salt, digest]).toString('base64');
}

export async function createBrokerUsers(specs: readonly BrokerUserSpec[], vhost = '/'): Promise<BrokerUsers> {
  const passwords: Record<string, string> = {};
  for (const s of specs) passwords[s.name] = randomBytes(18).toString('base64url');
  const defs = {
    users: specs.map((s) => ({ name: s.name, password_hash: rabbitPasswordHash(passwords[s.name]!), hashing_algorithm: 'rabbit_password_hashing_sha256', tags: [] })),
    permissions: specs.map((s) => ({ user: s.name, vhost, configure: s.configure, write: s.write, read: s.read })),
    topic_permissions: specs.flatMap((s) => (s.topic ? [{ user: s.name, vhost, exchange: s.topic.exchange, write: s.topic.write, read: s.topic.read }] : [])),
  };
  // rabbitmqctl runs as the rabbitmq user, so the file must be readable by it; it lives only
  // for the import.
  const dir = mkdtempSync(join(tmpdir(), 'ev-broker-users-'));
  chmodSync(dir, 0o755);
  const file = join(dir, 'users.json');
  writeFileSync(file, JSON.stringify(defs), { mode: 0o644 });
  try {
    ctl(['import_definitions', file]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  let removed = false;
  return {
    passwords,
    async remove() {
      if (removed) return;
      removed = true;
      for (const s of specs) {
        try {
          ctl(['delete_user', s.name]);
        } catch {
          // already gone
        }
      }
    },
  };
}
