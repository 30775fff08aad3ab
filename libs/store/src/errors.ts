/**
 * Store errors, and the one function that translates SQLSTATEs into them. Callers branch on
 * error classes and `code`, never on driver message text.
 */
import { EverdictError } from '@everdict/contracts';

/** A write named a fence epoch (or lease owner) that is no longer current for the task. */
export class StaleFence extends EverdictError {
  constructor(readonly taskId: string, readonly epoch: number, readonly operation: string) {
    super('stale_fence', `stale fence for task ${taskId} at epoch ${epoch} (${operation})`, {
      details: { taskId, epoch, operation },
    });
  }
}

export class DuplicateKey extends EverdictError {
  constructor(constraint: string | undefined, cause: unknown) {
    super('duplicate_key', `duplicate key${constraint ? ` (${constraint})` : ''}`, { cause, details: { constraint } });
  }
}

export class ConstraintViolation extends EverdictError {
  constructor(constraint: string | undefined, cause: unknown) {
    super('constraint_violation', `constraint violated${constraint ? `: ${constraint}` : ''}`, { cause, details: { constraint } });
  }
}

/** Serialization failure or deadlock: the whole unit of work may be retried. */
class TransactionConflict extends EverdictError {
  constructor(cause: unknown) {
    super('transaction_conflict', 'transaction conflict; retry the unit of work', { retryable: true, cause });
  }
}

export class DatabaseUnavailable extends EverdictError {
  constructor(cause: unknown) {
    super('database_unavailable', 'database unavailable', { retryable: true, cause });
  }
}

/**
 * Text Postgres cannot store: a NUL character (text and jsonb reject \u0000) or a lone UTF-16
 * surrogate in jsonb. The edges refuse such input naming the field (see @everdict/http-api
 * `findBadText`); this is the store-side guard for any path that did not, never a 500.
 */
export class InvalidText extends EverdictError {
  constructor(cause: unknown) {
    super('invalid_text', 'text contains a NUL character or a lone UTF-16 surrogate', { cause });
  }
}

export class PaperMissing extends EverdictError {
  constructor(paperId: string) {
    super('paper_missing', `paper ${paperId} has no stored bytes`, { details: { paperId } });
  }
}

export class PaperCorrupt extends EverdictError {
  constructor(paperId: string, expected: string, actual: string) {
    super('paper_corrupt', `paper ${paperId} bytes do not match their hash`, { details: { paperId, expected, actual } });
  }
}

/**
 * A case's derivation did not give what its unit of work expected (SQLSTATE EV001, raised by
 * ev_expect_case_state): the unit of work rolled back and nothing of it was written. Its
 * writer does the work again without an expectation (groupCommit.ts).
 */
export class CaseStateUnexpected extends EverdictError {
  constructor(cause: unknown) {
    super('case_state_unexpected', 'a case did not derive the state its unit of work expected', { cause });
  }
}

export class MigrationError extends EverdictError {
  constructor(message: string, details: Record<string, unknown> = {}) {
    super('migration_failed', message, { details });
  }
}

interface PgLikeError {
  code?: string;
  constraint?: string;
}

/** SQLSTATE → typed error. Anything unrecognised passes through untouched. */
export function translateDbError(err: unknown): unknown {
  if (err instanceof EverdictError) return err;
  const e = err as PgLikeError;
  // A SQLSTATE is five characters; node's own errors carry codes like ECONNREFUSED instead.
  const code = typeof e?.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) ? e.code : undefined;
  if (code === undefined) {
    const m = `${typeof e?.code === 'string' ? e.code : ''} ${err instanceof Error ? err.message : ''}`;
    // Driver-side failures of a connection (no SQLSTATE): refused, reset, terminated, or a client
    // whose connection already failed being asked again.
    if (/ECONNREFUSED|ECONNRESET|EPIPE|EHOSTUNREACH|EAI_AGAIN|Connection terminated|connect ETIMEDOUT|not queryable|timeout exceeded when trying to connect/i.test(m)) return new DatabaseUnavailable(err);
    return err;
  }
  if (code === '23505') return new DuplicateKey(e.constraint, err);
  if (code === '23514' || code === '23503' || code === '23502') return new ConstraintViolation(e.constraint, err);
  if (code === '40001' || code === '40P01') return new TransactionConflict(err);
  if (code === '22021' || code === '22P05') return new InvalidText(err);
  if (code === 'EV001') return new CaseStateUnexpected(err);
  // jsonb's answer to a lone surrogate escape (22P02 also means other bad input: only this one).
  if (code === '22P02' && err instanceof Error && /type json/.test(err.message)) return new InvalidText(err);
  if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03') return new DatabaseUnavailable(err);
  return err;
}
