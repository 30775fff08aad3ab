/**
 * The provider-neutral model contract. The kernel speaks only these types; an adapter maps
 * them to one provider's wire format and back. Swapping a route swaps the adapter and nothing
 * else, so nothing here may carry provider-specific fields.
 */

export interface ModelToolSpec {
  readonly name: string;
  readonly description: string;
  readonly inputSchema: Readonly<Record<string, unknown>>;
}

/** A tool call exactly as the model emitted it; `argumentsText` is unparsed on purpose. */
export interface ModelToolCall {
  /** The model's correlation id; never a deduplication key. */
  readonly callId: string;
  readonly name: string;
  readonly argumentsText: string;
}

export type ChatMessage =
  | { readonly role: 'user'; readonly content: string }
  | { readonly role: 'assistant'; readonly content: string | null; readonly toolCalls: readonly ModelToolCall[] }
  | { readonly role: 'tool'; readonly callId: string; readonly name: string; readonly content: string; readonly isError: boolean };

export interface ModelRequest {
  readonly system: string | null;
  readonly messages: readonly ChatMessage[];
  readonly tools: readonly ModelToolSpec[];
  /** Default: the route's `maxOutputTokens`, else the adapter's default. */
  readonly maxOutputTokens?: number;
}

/** Measured by the provider. `null` means the provider did not say: unknown, never zero. */
export interface ModelUsage {
  readonly inputTokens: number | null;
  readonly outputTokens: number | null;
  /** Cost as the provider reported it (e.g. OpenRouter's `usage.cost`); absent/null: not reported. */
  readonly cost?: number | null;
}

export interface ModelOutput {
  readonly text: string | null;
  readonly toolCalls: readonly ModelToolCall[];
}

export interface ModelReply {
  readonly output: ModelOutput;
  readonly usage: ModelUsage;
  /** Provider's stop/finish reason as sent, or null. */
  readonly finishReason: string | null;
  /** The model the provider says answered, or null. */
  readonly providerModel: string | null;
  /** The exact response body (the response paper's bytes). */
  readonly raw: string;
}

/** Which route served a call: recorded with every model call so a route swap is visible. */
export interface RouteIdentity {
  readonly name: string;
  readonly adapter: AdapterKind;
  readonly model: string;
  /** `sha256:` of the route's canonical config (api keys are referenced by env name, never included). */
  readonly configHash: string;
}

export const ADAPTER_KINDS = ['openai', 'anthropic', 'scripted'] as const;
export type AdapterKind = (typeof ADAPTER_KINDS)[number];

export interface CallOptions {
  /** Caller cancellation (e.g. task cancel or shutdown). */
  readonly signal?: AbortSignal;
  /** Default: the route's `timeoutMs`. */
  readonly timeoutMs?: number;
}

/**
 * One model behind one route. `complete` performs exactly ONE provider request: adapters never
 * retry (SDK retries are off); the runtime decides retries from the classified `ModelError`.
 */
export interface ModelClient {
  readonly route: RouteIdentity;
  complete(request: ModelRequest, options?: CallOptions): Promise<ModelReply>;
}
