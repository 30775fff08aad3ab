/**
 * Webhook failures. Each maps to one HTTP status (`webhookHttpStatus`); none of them carries a
 * secret, a signature value or the request body. A refused request stores NOTHING: the handler
 * verifies before it parses, and only a verified, mapped payload reaches the sink.
 */
import { EverdictError } from '@everdict/contracts';

/** Why a request's authenticity was refused (→ 401). */
type SignatureRefusal =
  | 'missing_signature'
  | 'malformed_signature'
  | 'signature_mismatch'
  | 'missing_timestamp'
  | 'malformed_timestamp'
  | 'stale_timestamp';

/** The request is not provably from the configured sender. HTTP 401. */
export class WebhookUnauthenticated extends EverdictError {
  readonly reason: SignatureRefusal;
  constructor(source: string, reason: SignatureRefusal, header: string) {
    super('webhook_unauthenticated', `webhook ${source}: ${reason} (${header})`, { details: { source, reason, header } });
    this.reason = reason;
  }
}

/** No source of that name is configured. HTTP 404. */
export class WebhookUnknownSource extends EverdictError {
  constructor(source: string) {
    super('webhook_unknown_source', `no webhook source named ${JSON.stringify(source)}`, { details: { source } });
  }
}

/** The body exceeds the source's `maxBodyBytes`. HTTP 413. */
export class WebhookBodyTooLarge extends EverdictError {
  constructor(source: string, limit: number) {
    super('webhook_body_too_large', `webhook ${source}: body exceeds ${limit} bytes`, { details: { source, limit } });
  }
}

/** A verified body that does not map to an arrival. HTTP 422. `details.path` names the field. */
export class WebhookInvalidPayload extends EverdictError {
  constructor(source: string, path: string, problem: string) {
    super('webhook_invalid_payload', `webhook ${source}: ${path} ${problem}`, { details: { source, path, problem } });
  }
}

/** The HTTP status for a webhook failure; 500 for anything that is not one. */
export function webhookHttpStatus(err: unknown): number {
  if (err instanceof WebhookUnauthenticated) return 401;
  if (err instanceof WebhookUnknownSource) return 404;
  if (err instanceof WebhookBodyTooLarge) return 413;
  if (err instanceof WebhookInvalidPayload) return 422;
  return 500;
}
