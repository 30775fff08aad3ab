/**
 * Structured logging (pino, JSON lines on stdout).
 *
 * Convention: a log line carries SAFE IDS (case id, task id, message id, consumer, operation),
 * DURATIONS (`ms`), COUNTS and OUTCOME CLASSES (`outcome: 'applied' | 'duplicate' | …`, error
 * `code`). It never carries credentials, prompts, model responses, message payloads or customer
 * content: those live in papers (content-addressed, access-controlled) and are referred to by id.
 *
 * Enforcement, in layers, so one forgotten field does not leak a secret:
 * 1. pino `redact` paths censor the usual secret keys at the top level and one level down
 *    (`password`, `*.password`, `headers.authorization`, `databaseUrl`, …);
 * 2. a log formatter walks the merged object and censors every secret key at any depth, omits
 *    content keys (`prompt`, `content`, `body`, `payload`, …) and strips URL passwords from strings;
 * 3. the message string and serialized errors (message, stack) have URL passwords stripped too.
 *
 * A line written while a span is active carries `traceId` (the W3C trace id), so an operator
 * goes from a log line to its trace and back; lines about one case or task name `caseId`/`taskId`.
 */
import { pino, stdSerializers, stdTimeFunctions, type DestinationStream, type Logger } from 'pino';
import { activeTraceId } from '@everdict/tracing';
import type { LogLevel } from './config.js';
import { CENSORED, redactUrlCredentials, scrubSecrets } from './secrets.js';

export type { Logger } from 'pino';

interface CreateLoggerOptions {
  /** Service name, bound to every line as `service`. */
  service: string;
  /** Minimum level; default `info`. */
  level?: LogLevel;
  /** Where lines go; default stdout (synchronous, so lines survive `process.exit`). */
  destination?: DestinationStream;
}

const SECRET_PATHS = ['password', 'token', 'authorization', 'apiKey', 'secret', 'cookie', 'databaseUrl', 'amqpUrl', 'connectionString'];

/** The redact paths handed to pino; exported so tests and docs can list them. */
const REDACT_PATHS: readonly string[] = [
  ...SECRET_PATHS,
  ...SECRET_PATHS.map((p) => `*.${p}`),
  'headers.authorization',
  'headers.cookie',
  'headers["set-cookie"]',
  'req.headers.authorization',
  'req.headers.cookie',
  'config.databaseUrl',
  'config.amqpUrl',
];

/** pino's error serializer, then the same scrub as everything else (messages and stacks included). */
function scrubError(err: unknown): unknown {
  if (!(err instanceof Error)) return scrubSecrets(err);
  return scrubSecrets({ ...stdSerializers.err(err) });
}

export function createLogger(opts: CreateLoggerOptions): Logger {
  return pino(
    {
      level: opts.level ?? 'info',
      base: { service: opts.service },
      timestamp: stdTimeFunctions.isoTime,
      redact: { paths: [...REDACT_PATHS], censor: CENSORED },
      serializers: { err: scrubError, error: scrubError },
      // A line written inside a span names its trace, so logs and traces join on `traceId`.
      mixin: () => {
        const traceId = activeTraceId();
        return traceId === undefined ? {} : { traceId };
      },
      formatters: {
        log: (obj) => scrubSecrets(obj),
        bindings: (bindings) => scrubSecrets(bindings),
      },
      hooks: {
        logMethod(args, method) {
          const clean: unknown[] = args.map((a: unknown) => (typeof a === 'string' ? redactUrlCredentials(a) : a));
          // `log.error(err)` would take its message from err.message, past this hook: make it explicit.
          const first = clean[0];
          if (first instanceof Error) {
            clean[0] = { err: first };
            if (typeof clean[1] !== 'string') clean.splice(1, 0, redactUrlCredentials(first.message));
          }
          return method.apply(this, clean as Parameters<typeof method>);
        },
      },
    },
    opts.destination ?? pino.destination({ fd: 1, sync: true }),
  );
}
