/**
 * The service table of `everdict start`: for each of the five services, what it needs, its own
 * variables, its crash points, what it reads from files, and how it is started on a substrate.
 * This is the only place a service is composed onto a process — compose, the embedded node, the
 * test fleets and the benchmarks all run through it.
 *
 * A service's code is loaded only when the node runs it (`load`): a turn-worker process does not
 * carry intake's mail stack or the coordinator's connectors in its heap, which a small
 * semi-space turns into GC time on every turn.
 */
import { writeFileSync } from 'node:fs';
import type { ConnectorSet } from '@everdict/connectors';
import type { FleetConfig } from '@everdict/contracts';
import type { Substrate } from '@everdict/host';
import type { ConfigProblem, EnvSpec, EnvValues, LoadedFleetConfig, ServiceContext, crash } from '@everdict/service-kit';

export const FLEET_SERVICES = ['intake', 'turn-worker', 'gate', 'execution-coordinator', 'reconciler'] as const;
export type FleetService = (typeof FLEET_SERVICES)[number];

/** A file-backed input a service cannot run without, named by the variable that points at it. */
export type Requirement = 'EVERDICT_CONFIG';

type Env = Readonly<Record<string, string | undefined>>;

/** What the node hands every service: validated before the substrate opened. */
export interface NodeInputs {
  readonly loaded: LoadedFleetConfig;
  /** Opened from the fleet config's `connectors` by the plan; closed by the node's drain. */
  connectors(): Promise<ConnectorSet>;
  /** The same set when the plan opened one, for a service that uses connectors only under some configs. */
  readonly openedConnectors: ConnectorSet | undefined;
  /** Crash injection for fault tests (EVERDICT_CRASHPOINT), shared by every service's points. */
  readonly crash: crash.CrashPoints<string>;
  readonly databaseUrl: string | undefined;
  readonly amqpUrl: string | undefined;
}

/** A started service; `replaceFleet` is present when the service holds the fleet config live. */
export interface StartedService {
  replaceFleet?(next: LoadedFleetConfig): void;
}

/** A service's code, once loaded. `P` is what `prepare` read from the files its variables name. */
export interface ServiceModule<S extends EnvSpec = EnvSpec, P = unknown> {
  /** The service's own variables (defaults documented on each). */
  readonly env: S;
  readonly crashPoints: readonly string[];
  /** Reads and checks the service's own files; every problem names its variable. */
  prepare?(values: EnvValues<S>, env: Env, problems: ConfigProblem[]): P;
  /** Postgres connections the service wants for a process of its own (default 10). */
  poolSize?(fleet: LoadedFleetConfig): number;
  start(ctx: ServiceContext, substrate: Substrate, inputs: NodeInputs, values: EnvValues<S>, prepared: P): Promise<StartedService>;
}

export interface ServiceDef {
  readonly name: FleetService;
  readonly needs: readonly Requirement[];
  /**
   * The JSON path of what makes this service open the connectors `fleet` declares (undefined:
   * nothing does). Judged once the fleet config is loaded; the plan then checks every variable
   * those declarations name.
   */
  connectorsFor?(fleet: FleetConfig): string | undefined;
  load(): Promise<ServiceModule>;
}

const module = <S extends EnvSpec, P>(m: ServiceModule<S, P>): ServiceModule => m as unknown as ServiceModule;

export const SERVICE_DEFS: Readonly<Record<FleetService, ServiceDef>> = {
  intake: {
    name: 'intake',
    needs: ['EVERDICT_CONFIG'],
    async load() {
      const { INTAKE_ENV, loadIntakeSources, startIntake } = await import('@everdict/intake');
      return module({
        env: INTAKE_ENV,
        crashPoints: [],
        prepare(v, env, problems) {
          if (v.sourcesPath === undefined) return undefined;
          try {
            return loadIntakeSources(v.sourcesPath, env);
          } catch (err) {
            problems.push({ name: 'EVERDICT_INTAKE_SOURCES', reason: err instanceof Error ? err.message : String(err) });
            return undefined;
          }
        },
        async start(ctx, substrate, inputs, _v, sources) {
          const intake = await startIntake(ctx, substrate, inputs.loaded.config, {
            ...(sources ? { sources } : {}),
            ...(inputs.databaseUrl ? { databaseUrl: inputs.databaseUrl } : {}),
            ...(inputs.amqpUrl ? { amqpUrl: inputs.amqpUrl } : {}),
          });
          return { replaceFleet: (next) => intake.replaceFleet(next.config) };
        },
      });
    },
  },
  'turn-worker': {
    name: 'turn-worker',
    needs: ['EVERDICT_CONFIG'],
    // Connector reads call connectors in this process; a turn-worker without them needs none.
    connectorsFor(fleet) {
      const name = Object.keys(fleet.profiles).find((p) => (fleet.profiles[p]?.reads?.length ?? 0) > 0);
      return name === undefined ? undefined : `/profiles/${name}/reads`;
    },
    async load() {
      const { CRASH_POINTS, TURN_WORKER_ENV, runtimeSettings, startTurnWorker } = await import('@everdict/turn-worker');
      return module({
        env: TURN_WORKER_ENV,
        crashPoints: CRASH_POINTS,
        poolSize: (fleet) => runtimeSettings(fleet.config).dbPoolSize,
        async start(ctx, substrate, inputs, v) {
          const running = await startTurnWorker(ctx, substrate, inputs.loaded, {
            crash: inputs.crash,
            modelLog: v.modelLog ?? null,
            ...(v.workerName ? { workerName: v.workerName } : {}),
            keepSamples: v.benchSamples !== undefined,
            ...(inputs.openedConnectors ? { connectors: inputs.openedConnectors } : {}),
          });
          if (v.benchSamples) {
            const file = v.benchSamples;
            // Written once the drain has finished every turn (the exit after the last hook).
            process.once('exit', () => writeFileSync(file, JSON.stringify(running.metrics.samples ?? [])));
          }
          return { replaceFleet: (next) => running.replaceFleet(next) };
        },
      });
    },
  },
  gate: {
    name: 'gate',
    needs: ['EVERDICT_CONFIG'],
    async load() {
      const { GATE_ENV, startGate } = await import('@everdict/gate');
      return module({
        env: GATE_ENV,
        crashPoints: [],
        async start(ctx, substrate, inputs, v) {
          const gate = await startGate(ctx, substrate, inputs.loaded.config, { grantTtlMs: v.grantTtlMs, gateTtlMs: v.gateTtlMs });
          return { replaceFleet: (next) => gate.replaceFleet(next.config) };
        },
      });
    },
  },
  'execution-coordinator': {
    name: 'execution-coordinator',
    needs: ['EVERDICT_CONFIG'],
    // It executes every declared write through its connector.
    connectorsFor: () => '/connectors',
    async load() {
      const { COORDINATOR_CRASH_POINTS, COORDINATOR_ENV, startExecutionCoordinator } = await import('@everdict/execution-coordinator');
      return module({
        env: COORDINATOR_ENV,
        crashPoints: COORDINATOR_CRASH_POINTS,
        async start(ctx, substrate, inputs, v) {
          await startExecutionCoordinator(ctx, substrate, inputs.loaded.config, { connectors: await inputs.connectors(), crash: inputs.crash, leaseMs: v.leaseMs, pollMs: v.pollMs });
          return {};
        },
      });
    },
  },
  reconciler: {
    name: 'reconciler',
    needs: ['EVERDICT_CONFIG'],
    // It asks each declared connector WhatLanded.
    connectorsFor: () => '/connectors',
    async load() {
      const { RECONCILER_ENV, reconcilerOptionsFromEnv, startReconciler } = await import('@everdict/reconciler');
      return module({
        env: RECONCILER_ENV,
        crashPoints: [],
        async start(ctx, substrate, inputs, v) {
          const { loop } = await startReconciler(ctx, substrate, inputs.loaded.config, { connectors: await inputs.connectors(), ...reconcilerOptionsFromEnv(v) });
          return { replaceFleet: (next) => loop.replaceFleet(next.config) };
        },
      });
    },
  },
};
