/**
 * Approval binds what runs (seed 004 §5): the packet writes.propose builds pins the template hash
 * the connector built from the same declaration registers, so the digest every approval binds to
 * covers the exact request template; an edited template hashes differently.
 */
import { describe, expect, it } from 'vitest';
import type { FleetConfig, FleetHttpConnector } from '@everdict/contracts';
import { HttpServiceConnector, buildableConnectors } from '@everdict/connectors';
import { buildPacket } from '../src/proposal.js';

const CASE = '01a22950-1893-7572-9384-43fcdddac734';
const billing: FleetHttpConnector = {
  kind: 'http',
  target: { system: 'billing', environment: 'test' },
  baseUrl: 'http://127.0.0.1:1/api',
  operations: {
    'accounts.credit': {
      access: 'write',
      effectClass: 'payment',
      method: 'POST',
      path: '/accounts/{accountId}/credit',
      body: { amountCents: '{{amountCents}}' },
      params: { accountId: { type: 'string', maxLength: 16 }, amountCents: { type: 'integer', minimum: 1, maximum: 1000 } },
    },
  },
};
const fleetWith = (c: FleetHttpConnector) => ({ connectors: { billing: c } }) as Pick<FleetConfig, 'connectors'>;
const registered = (c: FleetHttpConnector) => {
  const built = buildableConnectors({ billing: c }, {}).connectors[0]!;
  if (built.kind !== 'http') throw new Error('http');
  return new HttpServiceConnector(built.config).describe().operations.find((o) => o.name === 'accounts.credit')!.templateHash;
};
const propose = (c: FleetHttpConnector) => {
  const r = buildPacket(
    { planStepId: 's1', connector: 'billing', operation: 'accounts.credit', params: { accountId: 'a', amountCents: 5 }, summary: 'credit', revert: { kind: 'manual', description: 'by hand' } },
    { accountId: 'a', amountCents: 5 },
    { caseId: CASE, envelope: { scope: { reads: 'all', writes: ['billing'], forbidden: [] } }, fleet: fleetWith(c), plan: null },
  );
  if (!r.ok) throw new Error(r.problems.join('; '));
  return r.packet;
};

describe('the packet pins the template', () => {
  it('with the hash the connector registers for the same declaration', () => {
    expect(propose(billing).operation.templateHash).toBe(registered(billing));
  });
  it('an edited body, path or parameter bound is another hash', () => {
    const op = billing.operations['accounts.credit']!;
    const edits: FleetHttpConnector[] = [
      { ...billing, operations: { 'accounts.credit': { ...op, body: { amountCents: '{{amountCents}}', memo: 'x' } } } },
      { ...billing, operations: { 'accounts.credit': { ...op, path: '/accounts/{accountId}/debit' } } },
      { ...billing, operations: { 'accounts.credit': { ...op, params: { ...op.params, amountCents: { type: 'integer', minimum: 1, maximum: 9999 } } } } },
    ];
    for (const e of edits) {
      expect(registered(e)).not.toBe(propose(billing).operation.templateHash);
      expect(propose(e).operation.templateHash).toBe(registered(e));
    }
  });
});
