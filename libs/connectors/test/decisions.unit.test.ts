import { describe, expect, it } from 'vitest';
import { EverdictError, isEverdictError, sealPacket } from '@everdict/contracts';
import type { ConnectorCapability, HttpAttempt } from '@everdict/connectors';
import {
  ConnectorRefused,
  admitPacket,
  admitRead,
  classifyCheckFailure,
  classifyExecuteFailure,
  classifyMutation,
  classifyReceiptLookup,
  compileTemplate,
  evaluateChecks,
  mayRetryAutomatically,
  paramViolations,
  resolvePointer,
  reviewPostgresConfig,
} from '@everdict/connectors';
import { packetFor } from './fixtures.js';

const HASH = `sha256:${'a'.repeat(64)}`;

const capability: ConnectorCapability = {
  connector: 'billing',
  kind: 'test',
  target: { system: 'billing', environment: 'test' },
  operations: [
    {
      name: 'accounts.credit',
      effectClass: 'dml',
      params: { accountId: { type: 'string', maxLength: 32 }, amountCents: { type: 'integer', minimum: 1, maximum: 100_000 } },
      dryRun: 'render',
      idempotent: false,
      templateHash: HASH,
      expectedCounts: { rows: null },
    },
  ],
  readOperations: [{ name: 'accounts.get', params: { accountId: { type: 'string', maxLength: 32 } }, templateHash: HASH }],
  whatLandedConclusive: true,
  whatLandedMethod: 'test',
};

const credit = (over: Partial<Parameters<typeof packetFor>[0]> = {}) =>
  packetFor({ connector: 'billing', operation: 'accounts.credit', params: { accountId: 'a1', amountCents: 100 }, expectedCounts: { rows: 1 }, ...over });

function refusal(fn: () => unknown): ConnectorRefused {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConnectorRefused) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('mayRetryAutomatically', () => {
  it('never retries a connector that cannot tell absence from uncertainty', () => {
    for (const outcome of ['applied', 'not_applied', 'partly_applied', 'unknown'] as const) {
      expect(mayRetryAutomatically({ whatLandedConclusive: false }, outcome)).toBe(false);
    }
  });
  it('retries a conclusive connector only after proven absence', () => {
    expect(mayRetryAutomatically({ whatLandedConclusive: true }, 'not_applied')).toBe(true);
    expect(mayRetryAutomatically({ whatLandedConclusive: true }, 'unknown')).toBe(false);
    expect(mayRetryAutomatically({ whatLandedConclusive: true }, 'applied')).toBe(false);
    expect(mayRetryAutomatically({ whatLandedConclusive: true }, 'partly_applied')).toBe(false);
  });
});

describe('admission', () => {
  it('admits an exact packet and returns the counts to enforce', () => {
    expect(admitPacket(capability, credit()).expectedCounts).toEqual({ rows: 1 });
  });

  it.each<[string, () => ReturnType<typeof credit>, string, string]>([
    ['another connector', () => ({ ...credit(), operation: { connector: 'crm', name: 'accounts.credit' }, target: { ...credit().target, connector: 'crm' } }), 'wrong_connector', '/operation/connector'],
    ['another environment', () => credit({ environment: 'prod' }), 'target_mismatch', '/target/environment'],
    ['an unregistered operation', () => credit({ operation: 'accounts.delete' }), 'unregistered_operation', '/operation/name'],
    ['a read as mutation', () => credit({ operation: 'accounts.get', params: { accountId: 'a1' } }), 'not_a_mutation', '/operation/name'],
    ['a wrong effect class', () => credit({ effectClass: 'ddl' }), 'effect_class_mismatch', '/effectClass'],
    ['an unbound parameter', () => credit({ params: { accountId: 'a1' } }), 'invalid_params', '/params/amountCents'],
    ['an extra parameter', () => credit({ params: { accountId: 'a1', amountCents: 1, memo: 'x' } }), 'invalid_params', '/params/memo'],
    ['an out-of-bound parameter', () => credit({ params: { accountId: 'a1', amountCents: 100_001 } }), 'invalid_params', '/params/amountCents'],
    ['a coerced parameter', () => credit({ params: { accountId: 'a1', amountCents: '100' } }), 'invalid_params', '/params/amountCents'],
    ['a missing count', () => credit({ expectedCounts: {} }), 'missing_expected_count', '/expectedCounts/rows'],
    ['an uncheckable count', () => credit({ expectedCounts: { rows: 1, pages: 2 } }), 'unsupported_expected_count', '/expectedCounts/pages'],
    ['a changed template', () => ({ ...credit(), operation: { connector: 'billing', name: 'accounts.credit', templateHash: `sha256:${'b'.repeat(64)}` } }), 'template_changed', '/operation/templateHash'],
    [
      'a check through an undeclared read',
      () => credit({ preconditions: [{ id: 'x', read: { operation: 'accounts.list', params: {} }, pointer: '', equals: 1 }] }),
      'unregistered_operation',
      '/preconditions/0/read/operation',
    ],
    ['a schema-invalid packet', () => ({ ...credit(), impactKeys: [] }), 'invalid_packet', '/impactKeys'],
    ['a tampered digest', () => ({ ...sealPacket(credit()), params: { accountId: 'a1', amountCents: 999 } }), 'invalid_packet', '/digest'],
  ])('refuses %s, naming the field', (_what, make, reason, path) => {
    const err = refusal(() => admitPacket(capability, make()));
    expect(err.reason).toBe(reason);
    expect(err.details['path']).toBe(path);
    expect(isEverdictError(err, 'connector_refused')).toBe(true);
  });

  it('refuses a read that is a mutation or undeclared', () => {
    expect(refusal(() => admitRead(capability, 'accounts.credit', {})).reason).toBe('not_a_read');
    expect(refusal(() => admitRead(capability, 'SELECT 1', {})).reason).toBe('unregistered_operation');
    expect(admitRead(capability, 'accounts.get', { accountId: 'a1' }).name).toBe('accounts.get');
  });

  it('checks parameter types exactly', () => {
    const specs = { id: { type: 'uuid' as const }, code: { type: 'string' as const, pattern: '[A-Z]{3}' }, kind: { type: 'string' as const, enum: ['a', 'b'] }, ok: { type: 'boolean' as const } };
    expect(paramViolations(specs, { id: '01900000-0000-7000-8000-000000000001', code: 'ABC', kind: 'a', ok: true }, '/p')).toEqual([]);
    const v = paramViolations(specs, { id: 'nope', code: 'ABCD', kind: 'c', ok: 1 }, '/p');
    expect(v.map((x) => x.path)).toEqual(['/p/id', '/p/code', '/p/kind', '/p/ok']);
  });
});

describe('checks', () => {
  it('resolves JSON pointers per RFC 6901', () => {
    const doc = { a: { 'b/c': [10, { '~d': 'x' }] } };
    expect(resolvePointer(doc, '')).toEqual({ found: true, value: doc });
    expect(resolvePointer(doc, '/a/b~1c/1/~0d')).toEqual({ found: true, value: 'x' });
    expect(resolvePointer(doc, '/a/b~1c/2')).toEqual({ found: false });
    expect(resolvePointer(doc, '/a/missing')).toEqual({ found: false });
  });

  it('compares by canonical JSON and reports each mismatch', () => {
    const check = (id: string, pointer: string, equals: unknown) => ({ id, read: { operation: 'r', params: {} }, pointer, equals: equals as never });
    const out = evaluateChecks([check('same', '', { b: 1, a: 2 }), check('diff', '/n', 1), check('gone', '/x', 1)], [{ a: 2, b: 1 }, { n: 2 }, {}]);
    expect(out).toEqual({
      status: 'violated',
      checked: ['same', 'diff', 'gone'],
      mismatches: [
        { id: 'diff', pointer: '/n', expected: 1, observed: 2 },
        { id: 'gone', pointer: '/x', expected: 1, observed: undefined },
      ],
    });
  });
});

describe('HTTP classification', () => {
  const response = (status: number, body = ''): HttpAttempt => ({ kind: 'response', status, body, complete: true });
  it('maps exchanges to WhatLanded', () => {
    expect(classifyMutation(response(201, '{"id":1}'), 'k').outcome).toBe('applied');
    expect(classifyMutation(response(422), 'k')).toMatchObject({ outcome: 'not_applied', reason: 'http_422' });
    expect(classifyMutation(response(409), 'k').outcome).toBe('unknown');
    expect(classifyMutation(response(503), 'k').outcome).toBe('unknown');
    expect(classifyMutation(response(302), 'k').outcome).toBe('unknown');
    expect(classifyMutation({ kind: 'lost', cause: 'ECONNRESET' }, 'k')).toMatchObject({ outcome: 'unknown', reason: 'connection_lost' });
    expect(classifyMutation({ kind: 'not_sent', cause: 'ECONNREFUSED' }, 'k')).toMatchObject({ outcome: 'not_applied', reason: 'not_sent' });
  });
  it('treats a missing receipt as absence only when the service declares receipts conclusive', () => {
    expect(classifyReceiptLookup(response(200, '{}'), 'k', false).outcome).toBe('applied');
    expect(classifyReceiptLookup(response(404), 'k', true).outcome).toBe('not_applied');
    expect(classifyReceiptLookup(response(404), 'k', false).outcome).toBe('unknown');
    expect(classifyReceiptLookup(response(500), 'k', true).outcome).toBe('unknown');
    expect(classifyReceiptLookup({ kind: 'lost', cause: 'timeout' }, 'k', true).outcome).toBe('unknown');
  });
});

describe('Postgres classification', () => {
  const serverError = (code: string) => Object.assign(new Error('server'), { code, severity: 'ERROR' });
  it('is conclusive before COMMIT and in doubt once COMMIT was sent', () => {
    expect(classifyExecuteFailure(serverError('23514'), false)).toMatchObject({ outcome: 'not_applied', reason: 'sqlstate_23514' });
    expect(classifyExecuteFailure(new Error('Connection terminated unexpectedly'), false).outcome).toBe('not_applied');
    expect(classifyExecuteFailure(serverError('55P03'), false)).toMatchObject({ outcome: 'unknown', reason: 'key_in_flight' });
    expect(classifyExecuteFailure(new Error('Connection terminated unexpectedly'), true)).toMatchObject({ outcome: 'unknown', reason: 'connection_lost_during_commit' });
    expect(classifyExecuteFailure(serverError('40001'), true).outcome).toBe('not_applied');
    expect(classifyExecuteFailure(serverError('57P01'), true).outcome).toBe('unknown');
    expect(classifyExecuteFailure(Object.assign(new Error('x'), { code: 'ECONNRESET' }), true).outcome).toBe('unknown');
    expect(classifyCheckFailure(serverError('55P03')).outcome).toBe('unknown');
  });
});

describe('SQL templates', () => {
  it('compiles named parameters to typed bind parameters, leaving literals, casts and comments alone', () => {
    const c = compileTemplate(
      "UPDATE t SET a = :amount, s = 'x:y''s', e = E'\\':n', d = $$:dollar$$ -- :comment\n WHERE id = :id AND k::text = :id /* :c */ ;",
      { amount: 'integer', id: 'uuid' },
    );
    expect(c.order).toEqual(['amount', 'id']);
    expect(c.text).toBe("UPDATE t SET a = $1::int8, s = 'x:y''s', e = E'\\':n', d = $$:dollar$$ -- :comment\n WHERE id = $2::uuid AND k::text = $2::uuid /* :c */");
  });

  it('refuses positional parameters, undeclared placeholders and second statements', () => {
    expect(() => compileTemplate('SELECT $1', {})).toThrow(/positional/);
    expect(() => compileTemplate('SELECT :x', {})).toThrow(/not a declared parameter/);
    expect(() => compileTemplate('SELECT 1; DROP TABLE t', {})).toThrow(/one statement/);
    expect(() => compileTemplate("SELECT 'open", {})).toThrow(/unterminated/);
  });

  it('reviews a whole configuration and lists every problem', () => {
    let caught: unknown;
    try {
      reviewPostgresConfig({
        name: 'estate',
        target: { system: 'db', environment: 'test' },
        templates: [
          { name: 'a', kind: 'mutate', sql: 'UPDATE t SET x = :x', params: { x: { type: 'integer' }, unused: { type: 'string' } } },
          { name: 'b', kind: 'read', sql: 'SELECT :y', params: {} },
        ],
      });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(EverdictError);
    const problems = (caught as EverdictError).details['problems'] as string[];
    expect(problems.some((p) => p.includes('needs an effectClass'))).toBe(true);
    expect(problems.some((p) => p.includes('unused is declared but not used'))).toBe(true);
    expect(problems.some((p) => p.includes(':y is not a declared parameter'))).toBe(true);
  });
});
