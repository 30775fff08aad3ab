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
  const code = typeof e?.code === 'string' ? e.code : undefined;
  if (code === undefined) {
    const m = err instanceof Error ? err.message : '';
    if (/ECONNREFUSED|ECONNRESET|Connection terminated|connect ETIMEDOUT/i.test(m)) return new DatabaseUnavailable(err);
    return err;
  }
  if (code === '23505') return new DuplicateKey(e.constraint, err);
  if (code === '23514' || code === '23503' || code === '23502') return new ConstraintViolation(e.constraint, err);
  if (code === '40001' || code === '40P01') return new TransactionConflict(err);
  if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03') return new DatabaseUnavailable(err);
  return err;
}
