/**
 * The service table of `everdict start`: for each of the five services, what it needs from the
 * environment and the files, its own variables, its crash points and how it is started on a
 * substrate. This is the only place a service is composed onto a process — compose, the
 * embedded node, the test fleets and the benchmarks all run through it.
 */
import { writeFileSync } from 'node:fs';
import { COORDINATOR_CRASH_POINTS, COORDINATOR_ENV, startExecutionCoordinator } from '@everdict/execution-coordinator';
import type { ConnectorSet } from '@everdict/connectors';
import { GATE_ENV, startGate } from '@everdict/gate';
import { INTAKE_ENV, startIntake } from '@everdict/intake';
import type { IntakeSources } from '@everdict/intake';
import type { Substrate } from '@everdict/host';
import { RECONCILER_ENV, reconcilerOptionsFromEnv, startReconciler } from '@everdict/reconciler';
import type { EnvSpec, EnvValues, LoadedFleetConfig, ServiceContext, crash } from '@everdict/service-kit';
import { CRASH_POINTS, TURN_WORKER_ENV, startTurnWorker } from '@everdict/turn-worker';

export const FLEET_SERVICES = ['intake', 'turn-worker', 'gate', 'execution-coordinator', 'reconciler'] as const;
export type FleetService = (typeof FLEET_SERVICES)[number];

/** A file-backed input a service cannot run without, named by the variable that points at it. */
export type Requirement = 'EVERDICT_CONFIG' | 'EVERDICT_CONNECTORS';

/** What the node hands every service: validated before the substrate opened. */
export interface NodeInputs {
  /** The fleet config of the moment: SIGHUP swaps it (see reload.ts). */
  readonly loaded: LoadedFleetConfig;
  /** Opened once, when the first service asks; closed by the node's drain. */
  connectors(): Promise<ConnectorSet>;
  readonly intakeSources: IntakeSources | undefined;
  /** Crash injection for fault tests (EVERDICT_CRASHPOINT), shared by every service's points. */
  readonly crash: crash.CrashPoints<string>;
  readonly databaseUrl: string | undefined;
  readonly amqpUrl: string | undefined;
}

/** A started service; `replaceFleet` is present when the service holds the fleet config live. */
export interface StartedService {
  replaceFleet?(next: LoadedFleetConfig): void;
}

export interface ServiceDef<S extends EnvSpec = EnvSpec> {
  readonly name: FleetService;
  readonly needs: readonly Requirement[];
  /** The service's own variables (defaults documented on each). */
  readonly env: S;
  readonly crashPoints: readonly string[];
  start(ctx: ServiceContext, substrate: Substrate, inputs: NodeInputs, values: EnvValues<S>): Promise<StartedService>;
}

const define = <S extends EnvSpec>(def: ServiceDef<S>): ServiceDef => def as unknown as ServiceDef;

export const SERVICE_DEFS: Readonly<Record<FleetService, ServiceDef>> = {
  intake: define({
    name: 'intake',
    needs: ['EVERDICT_CONFIG'],
    env: INTAKE_ENV,
    crashPoints: [],
    async start(ctx, substrate, inputs) {
      const intake = await startIntake(ctx, substrate, inputs.loaded.config, {
        ...(inputs.intakeSources ? { sources: inputs.intakeSources } : {}),
        ...(inputs.databaseUrl ? { databaseUrl: inputs.databaseUrl } : {}),
        ...(inputs.amqpUrl ? { amqpUrl: inputs.amqpUrl } : {}),
      });
      return { replaceFleet: (next) => intake.replaceFleet(next.config) };
    },
  }),
  'turn-worker': define({
    name: 'turn-worker',
    needs: ['EVERDICT_CONFIG'],
    env: TURN_WORKER_ENV,
    crashPoints: CRASH_POINTS,
    async start(ctx, substrate, inputs, v) {
      const running = await startTurnWorker(ctx, substrate, inputs.loaded, {
        crash: inputs.crash,
        modelLog: v.modelLog ?? null,
        ...(v.workerName ? { workerName: v.workerName } : {}),
        keepSamples: v.benchSamples !== undefined,
      });
      if (v.benchSamples) {
        const file = v.benchSamples;
        // Written once the drain has finished every turn (the exit after the last hook).
        process.once('exit', () => writeFileSync(file, JSON.stringify(running.metrics.samples ?? [])));
      }
      return { replaceFleet: (next) => running.replaceFleet(next) };
    },
  }),
  gate: define({
    name: 'gate',
    needs: ['EVERDICT_CONFIG'],
    env: GATE_ENV,
    crashPoints: [],
    async start(ctx, substrate, inputs, v) {
      const gate = await startGate(ctx, substrate, inputs.loaded.config, { grantTtlMs: v.grantTtlMs, gateTtlMs: v.gateTtlMs });
      return { replaceFleet: (next) => gate.replaceFleet(next.config) };
    },
  }),
  'execution-coordinator': define({
    name: 'execution-coordinator',
    needs: ['EVERDICT_CONFIG', 'EVERDICT_CONNECTORS'],
    env: COORDINATOR_ENV,
    crashPoints: COORDINATOR_CRASH_POINTS,
    async start(ctx, substrate, inputs, v) {
      await startExecutionCoordinator(ctx, substrate, inputs.loaded.config, { connectors: await inputs.connectors(), crash: inputs.crash, leaseMs: v.leaseMs, pollMs: v.pollMs });
      return {};
    },
  }),
  reconciler: define({
    name: 'reconciler',
    needs: ['EVERDICT_CONFIG', 'EVERDICT_CONNECTORS'],
    env: RECONCILER_ENV,
    crashPoints: [],
    async start(ctx, substrate, inputs, v) {
      await startReconciler(ctx, substrate, inputs.loaded.config, { connectors: await inputs.connectors(), ...reconcilerOptionsFromEnv(v) });
      return {};
    },
  }),
};
