/**
 * `startGate`: the gate service composed onto a process by `everdict start` (alone, or on a node
 * running several services): the `gate.requested` inbox consumer and the JSON API on the
 * process's HTTP port. Stateless: every fact lives in Postgres, so N gates can run side by side.
 */
import type { FleetConfig } from '@everdict/contracts';
import { startInboxConsumer } from '@everdict/bus';
import type { Substrate } from '@everdict/host';
import { PrincipalDirectory } from '@everdict/http-api';
import { busMetricsSink } from '@everdict/service-kit';
import type { ServiceContext } from '@everdict/service-kit';
import { webSessionLookup } from '@everdict/store';
import { gateApi } from './api.js';
import { outcomeApi } from './outcomes.js';
import { GATE_SERVICE, gateRequestedHandler } from './requests.js';

interface GateOptions {
  /** Lifetime of a grant from its issue, in ms (default 15 minutes). */
  readonly grantTtlMs?: number;
  /** Lifetime of an undecided gate when the request names no expiry, in ms (default 24 hours). */
  readonly gateTtlMs?: number;
  /** Unsettled deliveries at once (default 16). */
  readonly prefetch?: number;
}

export const DEFAULT_GRANT_TTL_MS = 15 * 60_000;
export const DEFAULT_GATE_TTL_MS = 24 * 60 * 60_000;

interface RunningGate {
  /** Swaps the fleet config (principals, gate policies) for everything that follows. */
  replaceFleet(fleet: FleetConfig): void;
}

export async function startGate(ctx: ServiceContext, substrate: Substrate, fleet: FleetConfig, opts: GateOptions = {}): Promise<RunningGate> {
  let current = fleet;
  let principals = new PrincipalDirectory(fleet.principals);
  const grantTtlMs = opts.grantTtlMs ?? DEFAULT_GRANT_TTL_MS;

  // The console's cookie sessions authenticate here too: one sign-in for the node's whole port.
  const webSessions = webSessionLookup(substrate.store.db);
  ctx.addRoutes(gateApi({ store: substrate.store, principals: () => principals, webSessions, grantTtlMs }));
  ctx.addRoutes(outcomeApi({ store: substrate.store, principals: () => principals, webSessions }));
  const consumer = await startInboxConsumer({
    store: substrate.store,
    transport: substrate.transport,
    service: GATE_SERVICE,
    handlers: { 'gate.requested': gateRequestedHandler({ gateTtlMs: opts.gateTtlMs ?? DEFAULT_GATE_TTL_MS, fleet: () => current }) },
    prefetch: opts.prefetch ?? 16,
    // Requests ready together share one unit of work (libs/bus consumer, batched mode): the
    // handler writes nothing but its unit of work, so a batch that rolls back is simply redone
    // delivery by delivery.
    batchSize: opts.prefetch ?? 16,
    metrics: busMetricsSink(ctx.metrics),
    logger: ctx.logger,
  });
  ctx.onShutdown('gate consumer', () => consumer.stop());
  ctx.logger.info({ principals: Object.keys(fleet.principals ?? {}).length, policies: Object.keys(fleet.gatePolicies ?? {}).length, grantTtlMs }, 'gate started');
  return {
    replaceFleet(next) {
      current = next;
      principals = new PrincipalDirectory(next.principals);
    },
  };
}
