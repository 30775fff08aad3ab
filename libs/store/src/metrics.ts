/**
 * What the store reports. Structurally identical to service-kit's StoreMetrics, so the store
 * never depends on prom-client; the composition root passes the real sink in.
 */
export interface StoreMetrics {
  staleFence(operation: string): void;
  /** A unit of work's end; 'duplicate': one on a delivery recorded already, rolled back having written nothing. */
  transaction(outcome: 'commit' | 'rollback' | 'duplicate', seconds: number): void;
}

export const noopStoreMetrics: StoreMetrics = {
  staleFence: () => {},
  transaction: () => {},
};
