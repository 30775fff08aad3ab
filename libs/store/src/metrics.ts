/**
 * What the store reports. Structurally identical to service-kit's StoreMetrics, so the store
 * never depends on prom-client; the composition root passes the real sink in.
 */
export interface StoreMetrics {
  staleFence(operation: string): void;
  transaction(outcome: 'commit' | 'rollback', seconds: number): void;
}

export const noopStoreMetrics: StoreMetrics = {
  staleFence: () => {},
  transaction: () => {},
};
