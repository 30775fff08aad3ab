/**
 * Whether the runtime may repeat a mutation without a human (§7). Pure.
 *
 * Only proof of absence licenses a retry: `not_applied` from a connector whose WhatLanded is
 * conclusive. `unknown` is reconciled first, never retried; `applied` has nothing to retry;
 * `partly_applied` needs compensation or a human, not a second attempt. A connector that cannot
 * tell absence from uncertainty is never retried automatically, whatever it answered — its
 * `not_applied` may be a missing receipt rather than a missing effect.
 *
 * "May" is not "should": the caller still decides whether the reason (e.g. a 4xx validation
 * error) can change on a second attempt, and a retry is a new journal call with a new key.
 */
import type { WhatLanded } from '@everdict/contracts';
import type { ConnectorCapability } from './connector.js';

export function mayRetryAutomatically(capability: Pick<ConnectorCapability, 'whatLandedConclusive'>, lastOutcome: WhatLanded): boolean {
  if (!capability.whatLandedConclusive) return false;
  return lastOutcome === 'not_applied';
}
