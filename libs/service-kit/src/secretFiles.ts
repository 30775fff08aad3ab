/**
 * Secrets from files (`X_FILE`), as container platforms mount them (compose/Kubernetes secrets).
 *
 * For every variable X that Everdict reads as a secret — DATABASE_URL, AMQP_URL,
 * MIGRATE_DATABASE_URL, EVERDICT_APP_DB_PASSWORD, EVERDICT_TOKEN, and every variable the fleet
 * config or the intake sources name (routes' apiKeyEnv, connectors' urlEnv / baseUrlEnv /
 * headersFromEnv, webhooks' secretsEnv, mailboxes' passwordEnv) — `X_FILE` may name a file whose
 * content, trimmed of surrounding whitespace, is the value.
 *
 * Invariants:
 * - X and X_FILE both set is a problem naming both: which one wins would be a guess.
 * - A problem names the variable and the file path (paths are not secrets); the file's content
 *   and the other variable's value never appear in a message.
 * - An empty file is a problem: an unset secret must look unset, not like an empty password.
 * - Only declared names are resolved: an unrelated `*_FILE` variable in the environment (a
 *   broker's RABBITMQ_CONFIG_FILE, compose's COMPOSE_FILE) is never read.
 */
import { readFileSync } from 'node:fs';
import type { ConfigProblem } from './config.js';

type Env = Readonly<Record<string, string | undefined>>;

/** Secrets every node may read by name, whatever its config says. */
export const SECRET_VARIABLES = ['DATABASE_URL', 'AMQP_URL', 'MIGRATE_DATABASE_URL', 'EVERDICT_APP_DB_PASSWORD', 'EVERDICT_TOKEN'] as const;

const isSet = (v: string | undefined): v is string => (v?.trim() ?? '') !== '';

type ReadFile = (path: string) => string;
const readUtf8: ReadFile = (path) => readFileSync(path, 'utf8');

/** One variable: its value from X or X_FILE; `problem` when they conflict or the file fails. */
export function secretFromEnv(env: Env, name: string, readFile: ReadFile = readUtf8): { value?: string; problem?: ConfigProblem } {
  const fileVar = `${name}_FILE`;
  const direct = env[name];
  const path = env[fileVar];
  if (!isSet(path)) return isSet(direct) ? { value: direct } : {};
  if (isSet(direct)) return { problem: { name: `${name}, ${fileVar}`, reason: `both are set; set ${name} or ${fileVar}, not both` } };
  let content: string;
  try {
    content = readFile(path.trim());
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? 'unreadable';
    return { problem: { name: fileVar, reason: `names ${JSON.stringify(path.trim())}, which cannot be read (${why})` } };
  }
  const value = content.trim();
  if (value === '') return { problem: { name: fileVar, reason: `names ${JSON.stringify(path.trim())}, which is empty` } };
  return { value };
}

/**
 * `env` with every name of `names` whose `X_FILE` is set replaced by the file's content.
 * Problems are appended to `problems` (the offending variable stays as it was); `fromFiles`
 * receives what was read, so a composition root can export it to readers of `process.env`.
 */
export function resolveSecretFiles(env: Env, names: Iterable<string>, problems: ConfigProblem[], opts: { readFile?: ReadFile; fromFiles?: Record<string, string> } = {}): Env {
  const out: Record<string, string | undefined> = { ...env };
  for (const name of new Set(names)) {
    if (!isSet(env[`${name}_FILE`])) continue;
    const r = secretFromEnv(env, name, opts.readFile);
    if (r.problem) problems.push(r.problem);
    else if (r.value !== undefined) {
      out[name] = r.value;
      if (opts.fromFiles) opts.fromFiles[name] = r.value;
    }
  }
  return out;
}
