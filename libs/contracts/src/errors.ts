/**
 * Typed failures. Every error the runtime raises on purpose carries a stable `code`, whether
 * retrying the same operation can help, and the original `cause`. Failures are told apart by
 * `code` (`isEverdictError`), never by string-matching messages.
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
