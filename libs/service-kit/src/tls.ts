/**
 * TLS to Postgres and RabbitMQ, from the environment (pure parsing; files read through `readFile`).
 *
 * Postgres: node-postgres reads `sslmode`, `sslrootcert`, `sslcert` and `sslkey` from the
 * DATABASE_URL query itself (files by path). PGSSLMODE / PGSSLROOTCERT / PGSSLCERT / PGSSLKEY, as
 * libpq spells them, fill in what the URL leaves out, so a CA can be mounted without editing the
 * secret URL. `sslmode` must be one of PG_SSL_MODES and named files must be readable: problems
 * name the variable, never the URL.
 *
 * RabbitMQ: an `amqps://` AMQP_URL is TLS; AMQP_TLS_CA_PATH (PEM bundle), AMQP_TLS_CERT_PATH and
 * AMQP_TLS_KEY_PATH (client certificate, both or neither) become the socket options. TLS files
 * with a plain `amqp://` URL are a problem: the operator asked for TLS and would not get it.
 */
import { readFileSync } from 'node:fs';
import type { ConfigProblem } from './config.js';

type Env = Readonly<Record<string, string | undefined>>;
type ReadFile = (path: string) => Buffer;

export const PG_SSL_MODES = ['disable', 'prefer', 'require', 'verify-ca', 'verify-full', 'no-verify'] as const;

const PG_FILE_PARAMS = [
  ['sslrootcert', 'PGSSLROOTCERT'],
  ['sslcert', 'PGSSLCERT'],
  ['sslkey', 'PGSSLKEY'],
] as const;

const set = (v: string | undefined): v is string => (v?.trim() ?? '') !== '';

function readable(path: string, variable: string, problems: ConfigProblem[], readFile: ReadFile): Buffer | undefined {
  try {
    return readFile(path);
  } catch (err) {
    problems.push({ name: variable, reason: `names ${JSON.stringify(path)}, which cannot be read (${(err as NodeJS.ErrnoException).code ?? 'unreadable'})` });
    return undefined;
  }
}

/**
 * DATABASE_URL with the libpq TLS variables merged into its query where it has none of its own,
 * after checking `sslmode` and the named files. Returns the URL unchanged when nothing applies.
 */
export function pgUrlWithTls(url: string, env: Env, problems: ConfigProblem[], readFile: ReadFile = readFileSync): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return url; // the URL parser of DATABASE_URL reports it
  }
  const q = parsed.searchParams;
  let changed = false;
  const modeFromEnv = !q.has('sslmode') && set(env['PGSSLMODE']);
  if (modeFromEnv) {
    q.set('sslmode', env['PGSSLMODE']!.trim());
    changed = true;
  }
  const mode = q.get('sslmode');
  if (mode !== null && !(PG_SSL_MODES as readonly string[]).includes(mode)) {
    problems.push({ name: modeFromEnv ? 'PGSSLMODE' : 'DATABASE_URL', reason: `sslmode must be one of ${PG_SSL_MODES.join(', ')}, got ${JSON.stringify(mode)}` });
  }
  for (const [param, variable] of PG_FILE_PARAMS) {
    const fromEnv = !q.has(param) && set(env[variable]);
    if (fromEnv) {
      q.set(param, env[variable]!.trim());
      changed = true;
    }
    const path = q.get(param);
    if (path !== null) readable(path, fromEnv ? variable : `DATABASE_URL (${param})`, problems, readFile);
  }
  return changed ? parsed.toString() : url;
}

/** Socket options amqplib passes to `tls.connect` for an amqps:// URL. */
export interface AmqpTlsOptions {
  ca?: Buffer[];
  cert?: Buffer;
  key?: Buffer;
}

/** The broker TLS files, read; `undefined` when none is named. */
export function amqpTlsOptions(amqpUrl: string | undefined, env: Env, problems: ConfigProblem[], readFile: ReadFile = readFileSync): AmqpTlsOptions | undefined {
  const ca = env['AMQP_TLS_CA_PATH'];
  const cert = env['AMQP_TLS_CERT_PATH'];
  const key = env['AMQP_TLS_KEY_PATH'];
  const named = [['AMQP_TLS_CA_PATH', ca], ['AMQP_TLS_CERT_PATH', cert], ['AMQP_TLS_KEY_PATH', key]].filter(([, v]) => set(v)).map(([n]) => n!);
  if (named.length === 0) return undefined;
  const urls = (amqpUrl ?? '').split(',').map((u) => u.trim()).filter(Boolean);
  const plain = urls.filter((u) => !u.toLowerCase().startsWith('amqps://'));
  if (urls.length > 0 && plain.length > 0) {
    problems.push({ name: 'AMQP_URL', reason: `must use amqps:// when ${named.join(', ')} ${named.length === 1 ? 'is' : 'are'} set (TLS files given, but the URL is not TLS)` });
  }
  if (set(cert) !== set(key)) problems.push({ name: set(cert) ? 'AMQP_TLS_KEY_PATH' : 'AMQP_TLS_CERT_PATH', reason: 'is required: a client certificate needs both AMQP_TLS_CERT_PATH and AMQP_TLS_KEY_PATH' });
  const out: AmqpTlsOptions = {};
  if (set(ca)) {
    const b = readable(ca.trim(), 'AMQP_TLS_CA_PATH', problems, readFile);
    if (b) out.ca = [b];
  }
  if (set(cert)) {
    const b = readable(cert.trim(), 'AMQP_TLS_CERT_PATH', problems, readFile);
    if (b) out.cert = b;
  }
  if (set(key)) {
    const b = readable(key.trim(), 'AMQP_TLS_KEY_PATH', problems, readFile);
    if (b) out.key = b;
  }
  return out;
}
