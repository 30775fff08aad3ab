/**
 * @everdict/bus — how messages move between Everdict services (DESIGN §3).
 *
 * - `Transport`: RabbitMQ (`connectAmqp`) or in-process (`InProcessTransport`), same contract.
 * - `InboxConsumer`: size limit → decode → inbox row + handler state change + outbox rows in one
 *   unit of work → COMMIT → ack; duplicates acked with nothing written, refusals dead-lettered.
 * - `OutboxRelay`: publishes committed outbox rows with many confirms in flight, marks them
 *   published only after the confirm, woken after each commit that enqueued (outboxWake.ts).
 * - Topology: `rabbitmq/definitions.json`, loaded and asserted identically at start.
 */
export * from './metrics.js';
export * from './logger.js';
export * from './topology.js';
export * from './transport.js';
export * from './amqp.js';
export * from './identity.js';
export * from './perService.js';
export * from './credentials.js';
export * from './permissions.js';
export * from './inprocess.js';
export * from './consumer.js';
export * from './relay.js';
