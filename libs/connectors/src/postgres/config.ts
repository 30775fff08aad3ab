/**
 * Configuration of a Postgres estate connector: reviewed SQL templates only. There is no way to
 * hand this connector free SQL; a name that is not declared here is refused before contact.
 */
import type { TargetIdentity } from '../connector.js';
import type { ParamSpec } from '../params.js';

export interface PgTemplateConfig {
  /** Registered operation name, e.g. "orders.cancel". */
  readonly name: string;
  readonly kind: 'mutate' | 'read';
  /**
   * One SQL statement with named parameters `:name` (casts `::type` are left alone). Each
   * parameter is sent as a typed bind value with an explicit cast; it never becomes SQL text.
   */
  readonly sql: string;
  readonly params: Readonly<Record<string, ParamSpec>>;
  /**
   * Mutations: the exact number of rows the statement must affect. Omitted = every packet must
   * state `expectedCounts.rows` itself. A different count rolls the transaction back.
   */
  readonly expectedRows?: number;
  /** Required for `mutate`. */
  readonly effectClass?: string;
  /** Default false. */
  readonly idempotent?: boolean;
  /** Reads: the most rows returned before the read is refused as too large. Default 1000. */
  readonly maxRows?: number;
}

export interface PostgresEstateConfig {
  /** Connector name as packets name it. */
  readonly name: string;
  readonly target: TargetIdentity;
  /** Receipts table in the TARGET database, optionally schema-qualified. Default "everdict_receipts". */
  readonly receiptsTable?: string;
  /** statement_timeout for every statement, in ms. Default 10 000. */
  readonly statementTimeoutMs?: number;
  /** How long WhatLanded waits for an in-flight execution holding the same key, in ms. Default 5 000. */
  readonly lockTimeoutMs?: number;
  readonly templates: readonly PgTemplateConfig[];
}
