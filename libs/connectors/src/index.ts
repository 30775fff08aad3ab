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
export * from './postState.js';
export type { HttpServiceConfig } from './http/config.js';
export { HttpServiceConnector } from './http/connector.js';
export { classifyMutation, classifyReceiptLookup } from './http/classify.js';
export type { HttpAttempt } from './http/transport.js';
export type { PgSelectConfig, PgTemplateConfig, PostgresEstateConfig } from './postgres/config.js';
export { PostgresEstateConnector, SELECT_OPERATION, estatePool, reviewPostgresConfig } from './postgres/connector.js';
export type { PgPoolPort, ReviewedPostgres } from './postgres/connector.js';
export { DEFAULT_READ_FUNCTIONS, readOnlyProblem, readPolicy } from './postgres/readonly.js';
export type { ReadPolicy } from './postgres/readonly.js';
export { classifyExecuteFailure, classifyCheckFailure } from './postgres/classify.js';
export { compileTemplate } from './postgres/template.js';
export * from './declaration.js';
export * from './connectorSet.js';
