/**
 * @everdict/connectors — the Connector contract and the real connectors (DESIGN §6).
 *
 * A connector is the only path from the runtime to an estate. Deterministic executor code calls
 * it with an approved packet; the connector admits the packet before any contact (connector,
 * target identity, registered operation, template hash, exact parameters), executes once under
 * the call's idempotency key, and answers WhatLanded — applied, not_applied, partly_applied or
 * unknown — together with how that was established.
 */
export * from './connector.js';
export * from './params.js';
export * from './errors.js';
export * from './admission.js';
export * from './checks.js';
export * from './retry.js';
export * from './template-hash.js';
export type { HttpMethod, HttpOperationConfig, HttpReceiptLookup, HttpServiceConfig } from './http/config.js';
export { HTTP_METHODS } from './http/config.js';
export { HttpServiceConnector, HTTP_CONNECTOR_KIND, describeHttp } from './http/connector.js';
export type { HttpServiceConnectorOptions } from './http/connector.js';
export { classifyMutation, classifyReceiptLookup } from './http/classify.js';
export type { HttpAttempt, HttpExchange } from './http/transport.js';
export { sendHttp } from './http/transport.js';
export type { PgTemplateConfig, PostgresEstateConfig } from './postgres/config.js';
export { PostgresEstateConnector, POSTGRES_CONNECTOR_KIND, estatePool, reviewPostgresConfig } from './postgres/connector.js';
export type { PgClientPort, PgPoolPort } from './postgres/connector.js';
export { classifyExecuteFailure, classifyCheckFailure, sqlState } from './postgres/classify.js';
export { compileTemplate, PG_CASTS } from './postgres/template.js';
export { DEFAULT_RECEIPTS_TABLE, RECEIPT_OUTCOMES } from './postgres/receipts.js';
export type { ReceiptOutcome } from './postgres/receipts.js';
export * from './connectorSet.js';
