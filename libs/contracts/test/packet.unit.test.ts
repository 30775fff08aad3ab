import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { EffectPacket } from '@everdict/contracts';
import {
  DIGEST_EXCLUDED_FIELDS,
  PACKET_SCHEMA_FILE,
  SCHEMAS_DIR,
  isEverdictError,
  mutationKey,
  packetDigest,
  packetMutationKey,
  sealPacket,
  semanticPacketHash,
  validatePacket,
  verifyPacketDigest,
} from '@everdict/contracts';

const CASE_ID = '01900000-0000-7000-8000-000000000001';
const GRANT = '01900000-0000-7000-8000-000000000021';

function samplePacket(): EffectPacket {
  return {
    packetVersion: 1,
    caseId: CASE_ID,
    planStepId: 'credit-refund',
    planRevision: 2,
    shapeVersion: 'billing-api-v3',
    operation: { connector: 'billing', name: 'accounts.credit' },
    effectClass: 'dml',
    target: { connector: 'billing', system: 'billing', environment: 'prod', account: 'acme' },
    params: { accountId: 'acct-42', amountCents: 1500, notify: false },
    expectedCounts: { rows: 1 },
    preconditions: [{ id: 'balance', read: { operation: 'accounts.get', params: { accountId: 'acct-42' } }, pointer: '/body/balanceCents', equals: 0 }],
    assertions: [{ id: 'credited', read: { operation: 'accounts.get', params: { accountId: 'acct-42' } }, pointer: '/body/balanceCents', equals: 1500 }],
    revert: { kind: 'operation', description: 'debit the same amount', operation: 'accounts.debit', params: { accountId: 'acct-42', amountCents: 1500 } },
    impactKeys: ['billing:prod:acct-42'],
    summary: 'Refund 15.00 to acct-42',
  };
}

/** The same JSON object with its keys (recursively) in reverse insertion order. */
function reverseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reverseKeys);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).reverse().map(([k, v]) => [k, reverseKeys(v)]));
}

describe('packetDigest', () => {
  it('is sha256 of the canonical form and stable under key order', () => {
    const p = samplePacket();
    const d = packetDigest(p);
    expect(d).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(packetDigest(reverseKeys(p) as EffectPacket)).toBe(d);
    expect(packetDigest(JSON.parse(JSON.stringify(p)) as EffectPacket)).toBe(d);
  });

  it('is unchanged by the digest, grant ids, verdicts and timestamps', () => {
    const p = samplePacket();
    const d = packetDigest(p);
    const later: EffectPacket = {
      ...p,
      digest: d,
      grantIds: [GRANT],
      verdicts: [
        { kind: 'audit', decision: 'audit', verdict: 'approve', digest: d, by: 'auditor.writes' },
        { kind: 'decision', decision: 'H5', verdict: 'approve', digest: d, by: 'alice', decidedAt: '2026-09-04T12:00:00Z' },
      ],
      createdAt: '2026-09-04T11:00:00Z',
    };
    expect(packetDigest(later)).toBe(d);
    expect(packetDigest({ ...later, digest: `sha256:${'0'.repeat(64)}` })).toBe(d);
    // Every excluded field is exercised above, so a new excluded field needs a line here too.
    expect(DIGEST_EXCLUDED_FIELDS.every((f) => f in later)).toBe(true);
  });

  it.each<[string, (p: EffectPacket) => void]>([
    ['a bound parameter value', (p) => (p.params['amountCents'] = 1501)],
    ['a bound parameter type', (p) => (p.params['amountCents'] = '1500')],
    ['an added parameter', (p) => (p.params['memo'] = 'x')],
    ['the target environment', (p) => (p.target.environment = 'staging')],
    ['the target account', (p) => (p.target.account = 'other')],
    ['the operation', (p) => (p.operation.name = 'accounts.debit')],
    ['an assertion', (p) => (p.assertions[0]!.equals = 1499)],
    ['a precondition', (p) => (p.preconditions[0]!.pointer = '/body/limitCents')],
    ['the expected count', (p) => (p.expectedCounts['rows'] = 2)],
    ['the revert descriptor', (p) => (p.revert.params = { accountId: 'acct-42', amountCents: 1 })],
    ['the plan revision', (p) => (p.planRevision = 3)],
    ['the shape version', (p) => (p.shapeVersion = 'billing-api-v4')],
    ['the impact keys', (p) => p.impactKeys.push('billing:prod')],
    ['the summary', (p) => (p.summary = 'Refund 150.00 to acct-42')],
  ])('changes when %s changes', (_what, mutate) => {
    const p = samplePacket();
    const changed = samplePacket();
    mutate(changed);
    expect(packetDigest(changed)).not.toBe(packetDigest(p));
  });
});

describe('verifyPacketDigest', () => {
  it('accepts the sealed digest and detects tampering with content or digest', () => {
    const sealed = sealPacket(samplePacket());
    expect(verifyPacketDigest(sealed)).toBe(true);
    expect(verifyPacketDigest(sealed, sealed.digest)).toBe(true);

    const tamperedContent = { ...sealed, params: { ...sealed.params, amountCents: 150000 } };
    expect(verifyPacketDigest(tamperedContent)).toBe(false);

    const flipped = sealed.digest.slice(0, -1) + (sealed.digest.endsWith('0') ? '1' : '0');
    expect(verifyPacketDigest(sealed, flipped)).toBe(false);
    expect(verifyPacketDigest({ ...sealed, digest: flipped })).toBe(false);
    expect(verifyPacketDigest(samplePacket())).toBe(false); // nothing to verify against
    expect(verifyPacketDigest(samplePacket(), sealed.digest)).toBe(true);
    expect(verifyPacketDigest(samplePacket(), 'sha256:nothex')).toBe(false);
  });
});

describe('semanticPacketHash and mutationKey', () => {
  it('ignores re-planning, refreshed checks, prose and authority; follows operation, target and params', () => {
    const p = samplePacket();
    const h = semanticPacketHash(p);
    const replanned: EffectPacket = {
      ...p,
      planRevision: 5,
      shapeVersion: 'billing-api-v4',
      preconditions: [],
      summary: 'reworded',
      grantIds: [GRANT],
      createdAt: '2026-09-05T00:00:00Z',
      operation: { ...p.operation, templateHash: `sha256:${'c'.repeat(64)}` },
    };
    expect(semanticPacketHash(replanned)).toBe(h);
    expect(semanticPacketHash(reverseKeys(p) as EffectPacket)).toBe(h);
    expect(semanticPacketHash({ ...p, params: { ...p.params, amountCents: 1 } })).not.toBe(h);
    expect(semanticPacketHash({ ...p, target: { ...p.target, environment: 'staging' } })).not.toBe(h);
    expect(semanticPacketHash({ ...p, operation: { connector: 'billing', name: 'accounts.debit' } })).not.toBe(h);
  });

  it('builds case/step/hash keys and refuses malformed parts by name', () => {
    const p = samplePacket();
    expect(packetMutationKey(p)).toBe(`${CASE_ID}/credit-refund/${semanticPacketHash(p)}`);
    expect(packetMutationKey({ ...p, planRevision: 9 })).toBe(packetMutationKey(p));
    const cases: [string, string, string, string][] = [
      ['CASE', 'step', semanticPacketHash(p), 'caseId'],
      [CASE_ID, 'a/b', semanticPacketHash(p), 'planStepId'],
      [CASE_ID, 'step', 'sha256:xyz', 'semanticHash'],
    ];
    for (const [c, s, h, field] of cases) {
      let caught: unknown;
      try {
        mutationKey(c, s, h);
      } catch (err) {
        caught = err;
      }
      expect(isEverdictError(caught, 'invalid_mutation_key')).toBe(true);
      expect((caught as { details: Record<string, unknown> }).details['path']).toBe(field);
    }
  });
});

describe('validatePacket', () => {
  it('accepts a well-formed packet, sealed or not', () => {
    expect(validatePacket(samplePacket()).ok).toBe(true);
    const sealed = sealPacket(samplePacket());
    const withVerdict = { ...sealed, verdicts: [{ kind: 'decision', decision: 'H5', verdict: 'approve', digest: sealed.digest }] };
    expect(validatePacket(withVerdict)).toEqual({ ok: true, packet: withVerdict });
  });

  it('names the failing field for schema violations', () => {
    const p = samplePacket() as unknown as Record<string, unknown>;
    const missing = { ...p };
    delete missing['revert'];
    const r1 = validatePacket(missing);
    expect(r1.ok).toBe(false);
    if (!r1.ok) expect(r1.violations).toContainEqual({ path: '/revert', message: 'is required' });

    const r2 = validatePacket({ ...p, author: 'model' });
    expect(!r2.ok && r2.violations.some((v) => v.path === '/author')).toBe(true);

    const r3 = validatePacket({ ...p, revert: { kind: 'operation', description: 'undo' } });
    expect(!r3.ok && r3.violations.some((v) => v.path === '/revert/operation')).toBe(true);

    const r4 = validatePacket({ ...p, params: { nested: { a: 1 } } });
    expect(!r4.ok && r4.violations.some((v) => v.path.startsWith('/params/nested'))).toBe(true);
  });

  it('refuses a mismatched target connector, a wrong digest and a verdict on another digest', () => {
    const p = samplePacket();
    const r1 = validatePacket({ ...p, target: { ...p.target, connector: 'crm' } });
    expect(!r1.ok && r1.violations).toEqual([{ path: '/target/connector', message: 'must equal /operation/connector' }]);

    const sealed = sealPacket(p);
    const r2 = validatePacket({ ...sealed, params: { ...sealed.params, amountCents: 9 } });
    expect(!r2.ok && r2.violations).toEqual([{ path: '/digest', message: 'does not match the packet content' }]);

    const other = `sha256:${'d'.repeat(64)}`;
    const r3 = validatePacket({ ...sealed, verdicts: [{ kind: 'audit', decision: 'audit', verdict: 'approve', digest: other }] });
    expect(!r3.ok && r3.violations).toEqual([{ path: '/verdicts/0/digest', message: 'is not the digest of this packet' }]);
  });

  it('lists every date-time field of the schema among the digest exclusions', () => {
    const schema = JSON.parse(readFileSync(join(SCHEMAS_DIR, PACKET_SCHEMA_FILE), 'utf8')) as { properties: Record<string, { format?: string }> };
    const timestamps = Object.entries(schema.properties).filter(([, s]) => s.format === 'date-time').map(([k]) => k);
    expect(timestamps.length).toBeGreaterThan(0);
    for (const field of timestamps) expect(DIGEST_EXCLUDED_FIELDS).toContain(field);
    for (const field of DIGEST_EXCLUDED_FIELDS) expect(Object.keys(schema.properties)).toContain(field);
  });
});
