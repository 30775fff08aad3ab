/** Kernel tunables. Every field has a default; hosts override per profile. */
export interface KernelPolicy {
  /** Attempts per model call for `retryable` failures, including the first. Default 3. */
  readonly modelAttempts: number;
  /** Backoff before the 2nd attempt; doubles each attempt. Default 250 ms. */
  readonly retryBackoffMs: number;
  /** Per-call model timeout; default: the route's. */
  readonly modelTimeoutMs?: number;
  /** Results longer than this are offloaded to the ResultStore (K6). Default 8000 chars. */
  readonly inlineResultChars: number;
  /** How much of an offloaded result the model sees inline. Default 1000 chars. */
  readonly previewChars: number;
  /** Default page size of `read_tool_result`. Default 8000 chars. */
  readonly pageChars: number;
  /** Sub-agents may spawn while their depth is below this. Default 3. */
  readonly maxDepth: number;
}

export const DEFAULT_POLICY: KernelPolicy = Object.freeze({
  modelAttempts: 3,
  retryBackoffMs: 250,
  inlineResultChars: 8000,
  previewChars: 1000,
  pageChars: 8000,
  maxDepth: 3,
});
