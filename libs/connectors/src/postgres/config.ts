/**
 * Configuration of a Postgres estate connector: reviewed SQL templates, plus optionally one
 * ad-hoc read operation (`select`) whose query is verified read-only on every call. A name that
 * is not declared here is refused before contact, and so is any read that fails verification
 * (see readonly.ts).
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
   * A `read` template must be a verified read-only SELECT (readonly.ts), checked at review.
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
  /**
   * Relations ("name" or "schema.name", as written in the SQL) that `read` templates may
   * reference. Omitted = read templates are not restricted by relation (mutations never are).
   */
  readonly relations?: readonly string[];
  /** Functions `read` templates may call beyond the built-in side-effect-free set. Default none. */
  readonly allowedFunctions?: readonly string[];
  /**
   * Role every read runs as (`SET LOCAL ROLE`), so the database's own privileges bound what a
   * read can see; the connecting user must be a member. Omitted = the connecting user.
   */
  readonly readRole?: string;
  /** Registers the ad-hoc read `sql.select`. Omitted = no ad-hoc reads. */
  readonly select?: PgSelectConfig;
}

/**
 * The ad-hoc read `sql.select` taking `{ "query": string }`: one SELECT, verified per call
 * against these lists before any connection is checked out.
 */
export interface PgSelectConfig {
  /** The relations a query may reference. Required and non-empty. */
  readonly relations: readonly string[];
  /**
   * Functions a query may call beyond the built-in side-effect-free set. The connector-level
   * `allowedFunctions` does not apply here: ad-hoc queries get only what is named for them.
   */
  readonly allowedFunctions?: readonly string[];
  /** The most rows a query returns before the read is refused as too large. Default 1000. */
  readonly maxRows?: number;
}
