/**
 * Typed failures. Every error the runtime raises on purpose carries a stable `code`, whether
 * retrying the same operation can help, and the original `cause`. Unknown throwables are
 * normalised once, in `toEverdictError`, never by string-matching messages.
 */
export class EverdictError extends Error {
  readonly code: string;
  readonly retryable: boolean;
  readonly details: Readonly<Record<string, unknown>>;

  constructor(code: string, message: string, opts: { retryable?: boolean; cause?: unknown; details?: Record<string, unknown> } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.code = code;
    this.retryable = opts.retryable ?? false;
    this.details = Object.freeze({ ...(opts.details ?? {}) });
  }
}

export function isEverdictError(err: unknown, code?: string): err is EverdictError {
  return err instanceof EverdictError && (code === undefined || err.code === code);
}

/** The single place where an unknown throwable becomes a typed one. */
export function toEverdictError(err: unknown, fallbackCode = 'internal'): EverdictError {
  if (err instanceof EverdictError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new EverdictError(fallbackCode, message, { cause: err });
}
