/**
 * @everdict/service-kit — the process bootstrap every Everdict service uses (DESIGN §2, §7):
 * validated env config, pino logger with secret redaction, a per-process prom-client registry
 * with the `everdict_*` bus/store metrics, /metrics /livez /readyz, and the SIGTERM drain.
 *
 * The store and bus libs never import this package: they take `BusMetrics` / `StoreMetrics`
 * (plain callback interfaces) and readiness pings as functions; services wire them here.
 */
export * from './config.js';
export * from './logger.js';
export * from './metrics.js';
export * from './readiness.js';
export * from './shutdown.js';
export * from './http.js';
export * from './service.js';
export { redactUrlCredentials, scrubSecrets } from './secrets.js';
export { SECRET_VARIABLES, resolveSecretFiles, secretFromEnv } from './secretFiles.js';
export { PG_SSL_MODES, amqpTlsOptions, pgUrlWithTls } from './tls.js';
export type { AmqpTlsOptions } from './tls.js';
export * from './fleetConfig.js';
export * as crash from './crashpoints.js';
