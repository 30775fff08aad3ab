/**
 * What the bus reports. Structurally identical to service-kit's `BusMetrics`, so the bus never
 * imports prom-client; the composition root hands in `busMetricsSink(metrics)`.
 * Labels stay bounded: message types, consumer (service) names, outcome classes and refusal
 * reasons — never message, case or task ids.
 */
export interface BusMetrics {
  published(type: string, n?: number): void;
  confirmed(n?: number): void;
  consumed(consumer: string, outcome: 'applied' | 'duplicate' | 'refused' | 'dead_lettered' | 'failed'): void;
  duplicate(consumer: string): void;
  refused(consumer: string, reason: string): void;
  deadLettered(consumer: string, reason: string): void;
  outboxLag(seconds: number, pending: number): void;
  handlerSeconds(consumer: string, seconds: number): void;
}

export const noopBusMetrics: BusMetrics = Object.freeze({
  published: () => {},
  confirmed: () => {},
  consumed: () => {},
  duplicate: () => {},
  refused: () => {},
  deadLettered: () => {},
  outboxLag: () => {},
  handlerSeconds: () => {},
});
