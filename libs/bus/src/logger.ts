/**
 * The logging port: the subset of pino the bus uses (object first, message second). Callers
 * pass only safe ids (message id, type, queue, reason) — never payloads or credentials.
 */
export interface BusLogger {
  debug(obj: Record<string, unknown>, msg: string): void;
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
  error(obj: Record<string, unknown>, msg: string): void;
}

export const noopBusLogger: BusLogger = Object.freeze({
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
});

/** A safe one-line description of a failure for logs and dead-letter details (no stack, no payload). */
export function describeError(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    const prefix = typeof code === 'string' || typeof code === 'number' ? `${err.name}[${code}]` : err.name;
    return `${prefix}: ${err.message}`.slice(0, 500);
  }
  return String(err).slice(0, 500);
}
