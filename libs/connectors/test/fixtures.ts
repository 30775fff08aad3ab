/** Shared test fixtures: packets and a fixed clock. */
import type { EffectCheck, EffectPacket, EffectParams } from '@everdict/contracts';
import { manualClock } from '@everdict/contracts';
import type { ConnectorContext } from '@everdict/connectors';

export const CASE_ID = '01900000-0000-7000-8000-000000000001';
export const CALL_ID = '01900000-0000-7000-8000-000000000030';

export const ctx: ConnectorContext = { clock: manualClock('2026-09-04T12:00:00Z') };

export function packetFor(opts: {
  connector: string;
  operation: string;
  params: EffectParams;
  effectClass?: string;
  system?: string;
  environment?: string;
  account?: string;
  expectedCounts?: Record<string, number>;
  preconditions?: EffectCheck[];
  assertions?: EffectCheck[];
  planStepId?: string;
}): EffectPacket {
  return {
    packetVersion: 1,
    caseId: CASE_ID,
    planStepId: opts.planStepId ?? 'step-1',
    planRevision: 1,
    shapeVersion: 'v1',
    operation: { connector: opts.connector, name: opts.operation },
    effectClass: opts.effectClass ?? 'dml',
    target: {
      connector: opts.connector,
      system: opts.system ?? 'billing',
      environment: opts.environment ?? 'test',
      ...(opts.account === undefined ? {} : { account: opts.account }),
    },
    params: opts.params,
    expectedCounts: opts.expectedCounts ?? {},
    preconditions: opts.preconditions ?? [],
    assertions: opts.assertions ?? [],
    revert: { kind: 'manual', description: 'reverse by hand' },
    impactKeys: [`${opts.connector}:${opts.environment ?? 'test'}`],
  };
}
