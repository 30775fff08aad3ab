/**
 * Environment configuration (DESIGN §7): DATABASE_URL, AMQP_URL, EVERDICT_CONFIG, PORT, LOG_LEVEL.
 *
 * Invariants:
 * - Validation reports EVERY problem at once, each naming the variable and why, in one typed
 *   `ConfigError` (code `config_invalid`): an operator fixes the environment in one round trip.
 * - A rejected URL is never echoed: it may carry a password. Errors show the scheme at most.
 * - An empty (or all-blank) variable counts as unset, as compose files and shells often produce.
 * - Neither DATABASE_URL nor AMQP_URL is required: without them the fleet runs embedded (§7).
 *
 * Services declare extra variables with `envVar(name, parse, { default | required })` and get the
 * same error style, in the same `ConfigError` as the base variables.
 */
import { EverdictError } from '@everdict/contracts';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface EnvConfig {
  /** DATABASE_URL: postgres:// or postgresql://; absent → embedded Postgres. */
  databaseUrl?: string;
  /** AMQP_URL: amqp:// or amqps://, or a comma-separated list of one cluster's nodes; absent → in-process transport. */
  amqpUrl?: string;
  /** EVERDICT_CONFIG: path of the fleet config file. */
  configPath?: string;
  /** PORT of the health/metrics HTTP server; default 8080; 0 picks a free port. */
  port: number;
  /** LOG_LEVEL; default `info`. */
  logLevel: LogLevel;
  /** The process's service name, as given by the composition root (not read from the env). */
  serviceName?: string;
}

/** One offending variable and why. `reason` never contains a secret. */
export interface ConfigProblem {
  readonly name: string;
  readonly reason: string;
}

export class ConfigError extends EverdictError {
  readonly fields: readonly ConfigProblem[];

  constructor(problems: readonly ConfigProblem[]) {
    const list = problems.map((p) => `${p.name}: ${p.reason}`).join('; ');
    const count = problems.length === 1 ? '1 problem' : `${problems.length} problems`;
    super('config_invalid', `invalid configuration (${count}): ${list}`, {
      details: { fields: problems.map((p) => ({ name: p.name, reason: p.reason })) },
    });
    this.fields = Object.freeze([...problems]);
  }
}

/**
 * Turns the raw (non-empty, trimmed) string into a value, or throws an Error whose message says
 * why it is wrong. The message is shown to operators: it must not contain secrets.
 */
type EnvParser<T> = (raw: string) => T;

type Resolution<T> = { ok: true; value: T } | { ok: false; reason: string };

/** A declared environment variable. Build with `envVar`. */
export interface EnvVar<T> {
  readonly name: string;
  resolve(raw: string | undefined): Resolution<T>;
}

export type EnvSpec = Readonly<Record<string, EnvVar<unknown>>>;
export type EnvValues<S extends EnvSpec> = { -readonly [K in keyof S]: S[K] extends EnvVar<infer T> ? T : never };

/** A variable with a default: always yields a value. */
export function envVar<T>(name: string, parse: EnvParser<T>, opts: { default: T }): EnvVar<T>;
/** A required variable: unset is a problem. */
export function envVar<T>(name: string, parse: EnvParser<T>, opts: { required: true }): EnvVar<T>;
/** An optional variable: unset yields `undefined`. */
export function envVar<T>(name: string, parse: EnvParser<T>, opts?: { required?: false }): EnvVar<T | undefined>;
export function envVar<T>(name: string, parse: EnvParser<T>, opts: { default?: T; required?: boolean } = {}): EnvVar<T | undefined> {
  const hasDefault = Object.prototype.hasOwnProperty.call(opts, 'default');
  return {
    name,
    resolve(raw) {
      const text = raw?.trim() ?? '';
      if (text === '') {
        if (hasDefault) return { ok: true, value: opts.default };
        if (opts.required === true) return { ok: false, reason: 'is required but not set' };
        return { ok: true, value: undefined };
      }
      try {
        return { ok: true, value: parse(text) };
      } catch (err) {
        return { ok: false, reason: err instanceof Error ? err.message : String(err) };
      }
    },
  };
}

// ---- parsers -------------------------------------------------------------------------------

/** An integer in [min, max]; the raw value is echoed (integers are not secrets). */
export function integerParser(min: number, max: number, hint = ''): EnvParser<number> {
  return (raw) => {
    const n = /^[+-]?\d+$/.test(raw) ? Number(raw) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      throw new Error(`must be an integer ${min}-${max}${hint}, got ${JSON.stringify(raw)}`);
    }
    return n;
  };
}

export const parsePort: EnvParser<number> = integerParser(0, 65535, ' (0 picks a free port)');

/** One of a fixed set of words (case-insensitive); the raw value is echoed. */
function oneOfParser<const V extends string>(values: readonly V[]): EnvParser<V> {
  return (raw) => {
    const v = raw.toLowerCase();
    const hit = values.find((x) => x === v);
    if (hit === undefined) throw new Error(`must be one of ${values.join(', ')}, got ${JSON.stringify(raw)}`);
    return hit;
  };
}

const parseLogLevel: EnvParser<LogLevel> = oneOfParser(LOG_LEVELS);

export const parseBoolean: EnvParser<boolean> = (raw) => {
  const v = raw.toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off'].includes(v)) return false;
  throw new Error(`must be true/false (or 1/0, yes/no, on/off), got ${JSON.stringify(raw)}`);
};

/**
 * A URL whose scheme is one of `schemes` (e.g. `['postgres:', 'postgresql:']`). The raw value is
 * never echoed — it may hold a password — at most its scheme is.
 */
export function urlParser(schemes: readonly string[]): EnvParser<string> {
  const article = /^[aeiou]/i.test(schemes[0] ?? '') ? 'an' : 'a';
  const expected = `must be ${article} ${schemes.map((s) => `${s}//`).join(' or ')} URL`;
  return (raw) => {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new Error(`${expected} (value is not a URL; not shown as it may hold credentials)`);
    }
    if (!schemes.includes(url.protocol)) throw new Error(`${expected}, got scheme ${JSON.stringify(url.protocol)}`);
    return raw;
  };
}

/**
 * A comma-separated list of URLs (the nodes of one cluster), each as `urlParser(schemes)`
 * requires; the raw value is returned unchanged. A problem names the entry by position only.
 */
export function urlListParser(schemes: readonly string[]): EnvParser<string> {
  const one = urlParser(schemes);
  return (raw) => {
    const parts = raw.split(',').map((p) => p.trim());
    if (parts.length === 1) return one(raw);
    parts.forEach((p, i) => {
      try {
        one(p);
      } catch (err) {
        throw new Error(`entry ${i + 1} of the comma-separated list: ${(err as Error).message}`, { cause: err });
      }
    });
    return raw;
  };
}

export const parseString: EnvParser<string> = (raw) => raw;

// ---- reading -------------------------------------------------------------------------------

type Env = Readonly<Record<string, string | undefined>>;

/**
 * Reads `spec` from `env`, appending every problem to `problems` instead of throwing, so a
 * composition root can gather the problems of several specs (and of its files) into one
 * ConfigError. Values of offending variables are absent from the result.
 */
export function collectEnv<S extends EnvSpec>(spec: S, env: Env, problems: ConfigProblem[]): EnvValues<S> {
  const values: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(spec)) {
    const r = v.resolve(env[v.name]);
    if (r.ok) values[key] = r.value;
    else problems.push({ name: v.name, reason: r.reason });
  }
  return values as EnvValues<S>;
}

/** Reads `spec` from `env`; throws one `ConfigError` listing every problem. */
export function readEnv<S extends EnvSpec>(spec: S, env: Env = process.env): EnvValues<S> {
  const problems: ConfigProblem[] = [];
  const values = collectEnv(spec, env, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return values;
}

export const BASE_ENV = {
  databaseUrl: envVar('DATABASE_URL', urlParser(['postgres:', 'postgresql:'])),
  amqpUrl: envVar('AMQP_URL', urlListParser(['amqp:', 'amqps:'])),
  configPath: envVar('EVERDICT_CONFIG', parseString),
  port: envVar('PORT', parsePort, { default: 8080 }),
  logLevel: envVar<LogLevel>('LOG_LEVEL', parseLogLevel, { default: 'info' }),
} satisfies EnvSpec;

interface LoadEnvOptions<S extends EnvSpec> {
  /** Stored as `serviceName`; default: absent. */
  serviceName?: string;
  /** The service's own variables, validated together with the base ones. Default: none. */
  extra?: S;
}

/**
 * The base configuration (plus `extra` variables) from `env` (default `process.env`). Throws one
 * `ConfigError` naming every offending variable, base and extra alike.
 */
export function loadEnvConfig<S extends EnvSpec = Record<never, never>>(
  env: Env = process.env,
  opts: LoadEnvOptions<S> = {},
): EnvConfig & EnvValues<S> {
  const extra = (opts.extra ?? {}) as S;
  const baseNames = new Set(Object.values(BASE_ENV).map((v) => v.name));
  for (const [key, v] of Object.entries(extra)) {
    if (key in BASE_ENV || baseNames.has(v.name)) {
      throw new EverdictError('config_spec_invalid', `extra env variable ${v.name} (key ${key}) collides with a base variable`);
    }
  }
  const problems: ConfigProblem[] = [];
  const base = collectEnv(BASE_ENV, env, problems);
  const more = collectEnv(extra, env, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  const config: EnvConfig = { port: base.port, logLevel: base.logLevel };
  if (base.databaseUrl !== undefined) config.databaseUrl = base.databaseUrl;
  if (base.amqpUrl !== undefined) config.amqpUrl = base.amqpUrl;
  if (base.configPath !== undefined) config.configPath = base.configPath;
  if (opts.serviceName !== undefined) config.serviceName = opts.serviceName;
  return { ...more, ...config };
}
