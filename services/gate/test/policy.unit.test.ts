import { describe, expect, it } from 'vitest';
import type { FleetConfig } from '@everdict/contracts';
import { deriveDecisions, pendingDecisions } from '../src/index.js';

const fleet: Pick<FleetConfig, 'gatePolicies' | 'connectors'> = {
  gatePolicies: {
    dml: { decisions: [{ decision: 'HW-dml', role: 'dba' }] },
    ddl: { decisions: [{ decision: 'HW-ddl', role: 'dba' }, { decision: 'H5', role: 'customer_owner' }] },
    send: { decisions: [{ decision: 'H5', role: 'customer_owner' }] },
    clash: { decisions: [{ decision: 'HW-dml', role: 'finance' }] },
    empty: { decisions: [] },
  },
  connectors: {
    crm: { kind: 'postgres', target: { system: 'crm', environment: 'test' }, urlEnv: 'CRM_DATABASE_URL', operations: { 'schema.alter': { access: 'write', effectClass: 'ddl' }, 'rows.fix': { access: 'write', effectClass: 'dml' }, 'rows.read': { access: 'read' } } },
  },
};

const facts = (o: Partial<{ connector: string; operation: string; effectClass: string; requested: string[] }>) => ({
  connector: 'crm',
  operation: 'rows.fix',
  effectClass: 'dml',
  requested: [],
  ...o,
});

describe('deriveDecisions', () => {
  it('takes the decisions of the packet class, sorted, one per name', () => {
    expect(deriveDecisions(facts({}), fleet)).toEqual({ decisions: [{ decision: 'HW-dml', role: 'dba' }], problems: [] });
    expect(deriveDecisions(facts({ operation: 'schema.alter', effectClass: 'ddl' }), fleet).decisions).toEqual([
      { decision: 'H5', role: 'customer_owner' },
      { decision: 'HW-ddl', role: 'dba' },
    ]);
  });

  it('adds the class the fleet registers for the operation: a packet cannot pick a cheaper class', () => {
    const d = deriveDecisions(facts({ operation: 'schema.alter', effectClass: 'dml' }), fleet);
    expect(d.problems).toEqual([]);
    expect(d.decisions.map((x) => x.decision)).toEqual(['H5', 'HW-ddl', 'HW-dml']);
  });

  it('adds requested decisions with the role some policy gives them, never a limit', () => {
    expect(deriveDecisions(facts({ requested: ['H5'] }), fleet).decisions.map((x) => x.decision)).toEqual(['H5', 'HW-dml']);
    expect(deriveDecisions(facts({ requested: ['HX-unknown'] }), fleet).problems).toEqual(['requested decision HX-unknown has no role in any gate policy']);
  });

  it('fails closed: unknown class, read operation, unregistered operation, role clash, no decision at all', () => {
    expect(deriveDecisions(facts({ connector: 'other', effectClass: 'deploy' }), fleet).problems).toEqual(['no gate policy for effect class deploy']);
    expect(deriveDecisions(facts({ operation: 'rows.read' }), fleet).problems).toEqual(['operation rows.read is a read; only writes pass a gate']);
    expect(deriveDecisions(facts({ operation: 'rows.drop' }), fleet).problems).toEqual(['operation rows.drop is not registered for connector crm']);
    // The registered class names HW-dml with another role than the packet class does.
    expect(deriveDecisions(facts({ effectClass: 'clash' }), fleet).problems[0]).toMatch(/HW-dml is assigned to two roles/);
    expect(deriveDecisions(facts({ connector: 'other', effectClass: 'clash', requested: [] }), { gatePolicies: { clash: { decisions: [{ decision: 'A', role: 'r1' }, { decision: 'A', role: 'r2' }] } } }).problems[0]).toMatch(/assigned to two roles/);
    expect(deriveDecisions(facts({ connector: 'other', effectClass: 'empty' }), fleet).problems[0]).toMatch(/requires no decision/);
  });
});

describe('pendingDecisions', () => {
  const required = [{ decision: 'HW-ddl', role: 'dba' }, { decision: 'H5', role: 'customer_owner' }];
  it('counts only approvals bound to the digest', () => {
    const d = 'sha256:' + 'a'.repeat(64);
    expect(pendingDecisions(required, [], d).map((x) => x.decision)).toEqual(['HW-ddl', 'H5']);
    expect(pendingDecisions(required, [{ decision: 'HW-ddl', verdict: 'approve', digest: d }], d).map((x) => x.decision)).toEqual(['H5']);
    expect(pendingDecisions(required, [{ decision: 'HW-ddl', verdict: 'approve', digest: 'sha256:' + 'b'.repeat(64) }], d)).toHaveLength(2);
    expect(pendingDecisions(required, [{ decision: 'H5', verdict: 'reject', digest: d }], d)).toHaveLength(2);
  });
});
