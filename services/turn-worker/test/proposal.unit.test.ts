/**
 * writes.propose decisions (proposal.ts, auditor.ts): step references, mechanical checks, scope,
 * mutation identity, the auditor's fail-closed parsing, and the park a proposal turns into.
 */
import { describe, expect, it } from 'vitest';
import { packetDigest } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import { parseVerdict } from '../src/auditor.js';
import { PROPOSE_DESCRIPTION, PROPOSE_INPUT_SCHEMA, bindImpactKeys, buildPacket, priorStep, resolveStepRefs, writeInScope } from '../src/proposal.js';
import type { PacketContext, ProposalArgs } from '../src/proposal.js';
import { waitOnProposal } from '../src/turnWrite.js';

const CASE = '01a22950-1893-7572-9384-43fcdddac734';
// Only what buildPacket reads of a connector declaration (kind-specific fields left out on purpose).
const fleet = {
  connectors: {
    billing: {
      kind: 'http',
      target: { system: 'billing', environment: 'test' },
      operations: {
        'accounts.credit': {
          access: 'write',
          effectClass: 'payment',
          params: { accountId: { type: 'string', maxLength: 16, pattern: '[a-z0-9-]+' }, amountCents: { type: 'integer', minimum: 1, maximum: 1000 } },
          impactKeys: ['billing:test:{accountId}'],
        },
        'accounts.debit': { access: 'write', effectClass: 'payment' },
        'accounts.get': { access: 'read' },
        'accounts.note': { access: 'write' },
      },
    },
    untargeted: { kind: 'http', operations: { 'x.write': { access: 'write', effectClass: 'send' } } },
  },
} as unknown as Pick<FleetConfig, 'connectors'>;
const envelope = { scope: { reads: 'all' as const, writes: ['writes__propose', 'billing'], forbidden: [] as string[] } };
const args = (o: Partial<ProposalArgs> = {}): ProposalArgs => ({
  planStepId: 'credit-1',
  connector: 'billing',
  operation: 'accounts.credit',
  params: { accountId: 'acct-1', amountCents: 500 },
  summary: 'credit acct-1',
  revert: { kind: 'manual', description: 'debit by hand' },
  ...o,
});
const ctx: PacketContext = { caseId: CASE, envelope, fleet, plan: null };
const build = (a: ProposalArgs, c: PacketContext = ctx) => buildPacket(a, a.params as Record<string, string | number>, c);

describe('buildPacket (mechanical checks)', () => {
  it('builds the exact packet: target from config, impact keys bound from params, effect class from the operation', () => {
    const r = build(args());
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.packet).toMatchObject({
      caseId: CASE,
      planStepId: 'credit-1',
      planRevision: 1,
      operation: { connector: 'billing', name: 'accounts.credit' },
      effectClass: 'payment',
      target: { connector: 'billing', system: 'billing', environment: 'test' },
      params: { accountId: 'acct-1', amountCents: 500 },
      impactKeys: ['billing:test:acct-1'],
    });
    expect(packetDigest(r.packet)).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it.each([
    ['an unregistered operation', args({ operation: 'accounts.delete' }), /not registered/],
    ['an unregistered connector', args({ connector: 'crm' }), /connector crm is not registered/],
    ['a read', args({ operation: 'accounts.get', params: {} }), /is a read, not a write/],
    ['an operation without effect class', args({ operation: 'accounts.note', params: {} }), /declares no effect class/],
    ['a parameter above its maximum', args({ params: { accountId: 'acct-1', amountCents: 5000 } }), /params.amountCents is above 1000/],
    ['a parameter of the wrong type', args({ params: { accountId: 'acct-1', amountCents: '5' } }), /params.amountCents must be an integer/],
    ['a parameter off its pattern', args({ params: { accountId: 'ACCT 1', amountCents: 5 } }), /params.accountId does not match its pattern/],
    ['an undeclared parameter', args({ params: { accountId: 'acct-1', amountCents: 5, extra: 'x' } }), /params.extra is not a parameter/],
    ['a missing parameter', args({ params: { accountId: 'acct-1' } }), /params.amountCents is required/],
    ['a revert naming an unregistered operation', args({ revert: { kind: 'operation', description: 'undo', operation: 'accounts.undo', params: {} } }), /revert.operation must be a registered write/],
    ['a connector without target identity', args({ connector: 'untargeted', operation: 'x.write', params: {} }), /declares no target identity/],
  ])('refuses %s, naming the field', (_what, a, problem) => {
    const r = build(a, { ...ctx, envelope: { scope: { ...envelope.scope, writes: ['writes__propose', 'billing', 'untargeted'] } } });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.problems.join('; ')).toMatch(problem);
  });

  it('a registered inverse operation is an acceptable revert', () => {
    expect(build(args({ revert: { kind: 'operation', description: 'debit back', operation: 'accounts.debit', params: { accountId: 'acct-1' } } })).ok).toBe(true);
  });

  it('a planned task must name one of its plan steps', () => {
    const planned = { ...ctx, plan: { revision: 3, stepIds: ['a', 'b'] } };
    const r = build(args(), planned);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.problems.join()).toMatch(/planStepId credit-1 is not a step of plan revision 3/);
    const ok = build(args({ planStepId: 'b' }), planned);
    expect(ok.ok && ok.packet.planRevision).toBe(3);
  });

  it('the write scope admits connectors and single operations; forbidden beats both', () => {
    expect(writeInScope({ scope: { reads: 'all', writes: ['billing'], forbidden: [] } }, 'billing', 'accounts.credit').allowed).toBe(true);
    expect(writeInScope({ scope: { reads: 'all', writes: ['billing/accounts.credit'], forbidden: [] } }, 'billing', 'accounts.credit').allowed).toBe(true);
    expect(writeInScope({ scope: { reads: 'all', writes: ['billing/accounts.debit'], forbidden: [] } }, 'billing', 'accounts.credit').allowed).toBe(false);
    expect(writeInScope({ scope: { reads: 'all', writes: ['billing/*'], forbidden: ['billing/accounts.credit'] } }, 'billing', 'accounts.credit')).toMatchObject({ allowed: false, why: expect.stringMatching(/forbidden/) });
    const r = build(args(), { ...ctx, envelope: { scope: { reads: 'all', writes: ['writes__propose'], forbidden: [] } } });
    expect(!r.ok && r.problems.join()).toMatch(/outside the case's write scope/);
  });

  it('impact-key templates need every placeholder', () => {
    expect(bindImpactKeys(['a:{x}:{y}'], { x: 1, y: 'z' })).toEqual({ keys: ['a:1:z'], problems: [] });
    expect(bindImpactKeys(['a:{x}'], {}).problems).toEqual(['impact key template "a:{x}" needs params.x']);
  });
});

describe('resolveStepRefs (returned ids before audit)', () => {
  it('binds a scalar from the earlier step receipt and keeps literal params', () => {
    const receipts = new Map([['open-ticket', { body: { id: 'T-9', n: 3 } }]]);
    expect(resolveStepRefs({ ticket: { fromStep: 'open-ticket', pointer: '/body/id' }, amount: 5 }, receipts)).toEqual({ ok: true, params: { ticket: 'T-9', amount: 5 } });
  });

  it('refuses a step without an applied effect, and a pointer to nothing or to a non-scalar', () => {
    const receipts = new Map<string, Record<string, unknown> | undefined>([['s', { body: { o: {} } }], ['none', undefined]]);
    const r = resolveStepRefs({ a: { fromStep: 'none', pointer: '/x' }, b: { fromStep: 's', pointer: '/body/missing' }, c: { fromStep: 's', pointer: '/body/o' } }, receipts);
    expect(r.ok).toBe(false);
    if (!r.ok) {
      expect(r.problems).toHaveLength(3);
      expect(r.problems[0]).toMatch(/params.a: plan step none has no applied effect/);
      expect(r.problems[1]).toMatch(/params.b: .* no scalar at \/body\/missing/);
    }
  });
});

describe('priorStep (mutation identity)', () => {
  const gate = (state: string) => ({ id: `g-${state}`, state, packet_digest: 'sha256:' + '0'.repeat(64) });
  it('a completed mutation returns its receipt; an unknown one is reconciled; a live gate is waited on', () => {
    expect(priorStep({ journal: { kind: 'completed', callId: 'c1', receipt: { id: 1 }, established: 'receipt' }, gates: [gate('approved')] })).toMatchObject({ kind: 'receipt', callId: 'c1' });
    expect(priorStep({ journal: { kind: 'in_doubt', callId: 'c2' }, gates: [gate('approved')] })).toEqual({ kind: 'reconciling', callId: 'c2' });
    expect(priorStep({ journal: { kind: 'none' }, gates: [gate('open')] })).toMatchObject({ kind: 'pending_gate', gateId: 'g-open' });
    expect(priorStep({ journal: { kind: 'none' }, gates: [gate('approved')] })).toMatchObject({ kind: 'pending_gate', gateId: 'g-approved' });
  });

  it('closed gates and conclusively failed attempts leave the change to a new packet', () => {
    expect(priorStep({ journal: { kind: 'none' }, gates: [gate('rejected'), gate('expired')] })).toEqual({ kind: 'new' });
    expect(priorStep({ journal: { kind: 'failed', callId: 'c3' }, gates: [gate('approved')] })).toEqual({ kind: 'new' });
    expect(priorStep({ journal: { kind: 'none' }, gates: [] })).toEqual({ kind: 'new' });
  });
});

describe('the auditor answer (fail closed)', () => {
  it('reads one verdict object, even inside prose', () => {
    expect(parseVerdict('ok {"verdict":"approve","reason":"fine"} thanks', 'a@1')).toEqual({ verdict: 'approve', reason: 'fine', by: 'a@1' });
    expect(parseVerdict('{"verdict":"reject","reason":"no"}', 'a@1').verdict).toBe('reject');
  });
  it.each([null, 'looks good to me', '{"verdict": "yes"}', '{"verdict": "approve"'])('anything else rejects: %s', (text) => {
    expect(parseVerdict(text, 'a@1').verdict).toBe('reject');
  });
});

describe('waitOnProposal', () => {
  const proposal = { kind: 'pending_gate' as const, gateId: 'g1', packetDigest: 'sha256:x', mutationKey: 'k' };
  it('a proposal turns going on into a park on its gate', () => {
    expect(waitOnProposal({ kind: 'continue' }, proposal)).toEqual({ kind: 'park', reason: 'gate', detail: { kind: 'effect', gateId: 'g1', packetDigest: 'sha256:x', mutationKey: 'k' }, backoffMs: null, ask: false });
    expect(waitOnProposal({ kind: 'continue' }, { kind: 'reconciling', effectCallId: 'c9', mutationKey: 'k' })).toMatchObject({ kind: 'park', reason: 'gate', detail: { kind: 'effect_reconciling', effectCallId: 'c9' } });
  });
  it('endings the kernel decided stand, and no proposal changes nothing', () => {
    const done = { kind: 'finish' as const, state: 'done' as const, summary: '', failureCode: null };
    expect(waitOnProposal(done, proposal)).toBe(done);
    expect(waitOnProposal({ kind: 'continue' }, null)).toEqual({ kind: 'continue' });
  });
});

describe('writes__propose as the model sees it', () => {
  it('its description and input schema are Latin-1 (one-byte strings in every request; see agent-runtime one-byte-text)', () => {
    const text = JSON.stringify({ d: PROPOSE_DESCRIPTION, s: PROPOSE_INPUT_SCHEMA });
    expect([...text].filter((c) => c.codePointAt(0)! > 0xff)).toEqual([]);
  });
});
