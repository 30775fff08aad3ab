/**
 * Configuration of an HTTP-service connector: the target's identity, its base URL, and the
 * operations the fleet config registers for it. Nothing outside this list is ever requested.
 */
import type { JsonValue, TargetIdentity } from '../connector.js';
import type { ParamSpec } from '../params.js';

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

export interface HttpOperationConfig {
  /** Registered operation name, e.g. "accounts.credit". */
  readonly name: string;
  /** `read` operations are used for reads, preconditions and assertions; `mutate` only through execute. */
  readonly kind: 'mutate' | 'read';
  readonly method: HttpMethod;
  /** Path under baseUrl; `{param}` placeholders take URL-encoded bound values. */
  readonly path: string;
  /**
   * JSON body template. A string that is exactly `"{{param}}"` becomes the bound value with its
   * type (number stays number); nothing else is substituted, so a value can never become syntax.
   */
  readonly body?: JsonValue;
  readonly params: Readonly<Record<string, ParamSpec>>;
  /** Required for `mutate`: the effect class gate policies map to decisions. */
  readonly effectClass?: string;
  /** Default false. */
  readonly idempotent?: boolean;
  /** For a mutation: the exact post-state a registered read shows once it landed (WhatLanded without a conclusive receipt). */
  readonly postState?: HttpPostState;
}

/**
 * The state a mutation leaves, stated exactly. A string that is exactly `"{{param}}"` in `params`
 * or `equals` takes the mutation's bound value. A match is proof of `applied`; a mismatch proves
 * nothing (another writer, a later change), so it never becomes `not_applied`.
 */
export interface HttpPostState {
  /** A registered read operation of this connector. */
  readonly read: string;
  readonly params?: Readonly<Record<string, string | number | boolean | undefined>>;
  /** JSON Pointer into the read result `{status, body}`. */
  readonly pointer: string;
  readonly equals: JsonValue;
}

export interface HttpReceiptLookup {
  /**
   * GET path that answers for one idempotency key; `{idempotencyKey}` is its only placeholder.
   * The key is also sent as the `Idempotency-Key` header. 2xx = applied (body = receipt).
   */
  readonly path: string;
  /**
   * The service guarantees that a 404 here means the key was not applied and never will be
   * (e.g. it records keys atomically with the effect and refuses late ones). Only then is a 404
   * conclusive absence, and only then may the runtime retry automatically.
   */
  readonly conclusive: boolean;
}

export interface HttpServiceConfig {
  /** Connector name as packets name it. */
  readonly name: string;
  readonly target: TargetIdentity;
  /** http:// or https:// base URL, optionally with a path prefix. */
  readonly baseUrl: string;
  /** Static headers for every request (e.g. authorization). Never rendered by dry runs. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Deadline per request in ms. Default 10 000. */
  readonly timeoutMs?: number;
  /** Largest response body kept in bytes. Default 1 MiB. */
  readonly maxResponseBytes?: number;
  /** Absent: the target has no receipts endpoint (WhatLanded then relies on `postState`, else an operator). */
  readonly receipts?: HttpReceiptLookup;
  readonly operations: readonly HttpOperationConfig[];
}
