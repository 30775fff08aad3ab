/**
 * SIGHUP: reload the fleet config (DESIGN §7 "a route swap changes the adapter without touching
 * any session record").
 *
 * Invariants:
 * - The new file is validated in full first — schema, references, an unchanged `connectors`
 *   section and, on a node without connectors, no profile listing connector reads — and only
 *   then handed to the services; a file with any problem changes nothing: the running config
 *   stays and every problem is logged with its JSON path.
 * - A SIGHUP never ends the process. The handler is installed before the node starts, so a HUP
 *   arriving during start-up is answered (ignored, with a log line) instead of Node's default
 *   action, which would kill the process without a drain.
 * - What reloads live: routes (the next model call of every task uses the new adapter), profiles,
 *   tools, case types, principals and gate policies. What needs a restart: connectors (opened
 *   once, with their pools and reviewed templates; a reload changing the section is refused on
 *   every node, so the gate never judges by a declaration the coordinator does not run), intake
 *   sources, environment variables. A running task meets a
 *   changed profile or route through the recorded version-change decision (turn-worker
 *   versions.ts), never silently.
 */
import { sameConnectors } from '@everdict/connectors';
import type { FleetConfig } from '@everdict/contracts';
import { FleetConfigError, loadFleetConfig } from '@everdict/service-kit';
import type { EverdictMetrics, LoadedFleetConfig, ServiceContext } from '@everdict/service-kit';

type ReloadOutcome = { applied: true; config: LoadedFleetConfig } | { applied: false; problems: { path: string; message: string }[] };

/** Reads and checks the fleet config at `path`; applies nothing. */
function checkFleetConfig(path: string, running: Pick<FleetConfig, 'connectors'>, unmet: ReloaderDeps['unmet']): ReloadOutcome {
  let config: LoadedFleetConfig;
  try {
    config = loadFleetConfig(path);
  } catch (err) {
    if (err instanceof FleetConfigError) return { applied: false, problems: err.problems.map((p) => ({ ...p })) };
    return { applied: false, problems: [{ path: '', message: err instanceof Error ? err.message : String(err) }] };
  }
  if (!sameConnectors(running.connectors, config.config.connectors)) return { applied: false, problems: [{ path: '/connectors', message: 'changed: a connectors change needs a restart (connectors are opened at start)' }] };
  const missing = unmet?.(config) ?? [];
  if (missing.length > 0) return { applied: false, problems: [...missing] };
  return { applied: true, config };
}

interface ReloaderDeps {
  readonly path: string;
  /** The config the node started with: its `connectors` section is the one the node runs. */
  readonly running: Pick<FleetConfig, 'connectors'>;
  /** What in a new config the node's services cannot run with as they were started (empty: nothing). */
  readonly unmet?: (next: LoadedFleetConfig) => readonly { path: string; message: string }[];
  readonly logger: ServiceContext['logger'];
  readonly counter: EverdictMetrics['config']['reloads'];
  /** Called with the new config once it passed every check. */
  apply(next: LoadedFleetConfig): void;
}

/** The SIGHUP handler of a running node. */
export function fleetReloader(deps: ReloaderDeps): () => ReloadOutcome {
  return () => {
    const started = performance.now();
    const outcome = checkFleetConfig(deps.path, deps.running, deps.unmet);
    const ms = Math.round(performance.now() - started);
    if (outcome.applied) {
      deps.apply(outcome.config);
      deps.counter.inc({ outcome: 'applied' });
      deps.logger.info({ config: deps.path, ms }, 'fleet config reloaded');
    } else {
      deps.counter.inc({ outcome: 'refused' });
      deps.logger.error({ config: deps.path, ms, problems: outcome.problems.slice(0, 20) }, 'fleet config reload refused; keeping the running config');
    }
    return outcome;
  };
}
