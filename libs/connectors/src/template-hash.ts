/**
 * The hash of a reviewed operation definition. A packet pins it (`operation.templateHash`), so
 * its digest — what every approval binds to — covers the exact request template, and a template
 * edited after approval is refused at dispatch instead of silently running different code.
 *
 * The connectors register their operations with these functions and the turn-worker pins a
 * proposal with them (`declaredTemplateHash`), so both sides hash the same definition.
 */
import { canonicalJson, sha256Hex } from '@everdict/contracts';
import type { HttpOperationConfig } from './http/config.js';
import type { PgTemplateConfig } from './postgres/config.js';

export const HTTP_CONNECTOR_KIND = 'http-service';
export const POSTGRES_CONNECTOR_KIND = 'postgres-estate';

export function templateHash(connectorKind: string, definition: unknown): string {
  return `sha256:${sha256Hex(canonicalJson({ connectorKind, definition }))}`;
}

/** What an HTTP operation sends: method, path and body templates, parameter bounds. */
export const httpOperationHash = (op: Pick<HttpOperationConfig, 'method' | 'path' | 'body' | 'params'>): string =>
  templateHash(HTTP_CONNECTOR_KIND, { method: op.method, path: op.path, body: op.body ?? null, params: op.params });

/** What a Postgres template runs: the statement, parameter bounds, the row count it commits. */
export const pgTemplateHash = (t: Pick<PgTemplateConfig, 'sql' | 'params' | 'expectedRows'>): string =>
  templateHash(POSTGRES_CONNECTOR_KIND, { sql: t.sql, params: t.params, expectedRows: t.expectedRows ?? null });
