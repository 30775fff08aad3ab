/**
 * Consent rules (K3), pure parts: the most specific rule wins (tool over connector operation over
 * connector / MCP server), no rule resolves to nothing (the hook refuses), the digest binds the
 * exact call (tool, canonical arguments, destination), the subject names the real destination,
 * a consent park waits on its gate, and the fleet config refuses a rule that names nothing.
 */
import { describe, expect, it } from 'vitest';
import type { FleetConfig } from '@everdict/contracts';
import { FleetConfigError, validateFleetConfig } from '@everdict/service-kit';
import { consentDigest, consentSubjectOf, resolveConsentRule, waitOnConsent, type ConsentAsk } from '../src/consent.js';

describe('resolveConsentRule', () => {
  const subject = { tool: 'tickets__search', source: 'tickets' };
  it.each([
    ['the tool name over its server', { tickets__search: 'allow', tickets: 'deny' }, { key: 'tickets__search', rule: 'allow' }],
    ['the server when no tool rule exists', { tickets: 'ask' }, { key: 'tickets', rule: 'ask' }],
    ['a rule for another tool does not apply', { tickets__other: 'allow' }, null],
    ['no rules at all', undefined, null],
  ] as const)('%s', (_label, rules, expected) => {
    expect(resolveConsentRule(rules as Record<string, 'allow' | 'deny' | 'ask'> | undefined, subject)).toEqual(expected);
  });

  it('a connector read: tool name, then connector/operation, then connector', () => {
    const read = { tool: 'notes__list', operation: 'notes/list', source: 'notes' };
    expect(resolveConsentRule({ notes: 'deny', 'notes/list': 'ask' }, read)).toEqual({ key: 'notes/list', rule: 'ask' });
    expect(resolveConsentRule({ notes: 'deny', 'notes/list': 'ask', notes__list: 'allow' }, read)).toEqual({ key: 'notes__list', rule: 'allow' });
    expect(resolveConsentRule({ notes: 'deny' }, read)).toEqual({ key: 'notes', rule: 'deny' });
  });

  it('inherited object keys are not rules', () => {
    expect(resolveConsentRule({}, { tool: 'toString' })).toBeNull();
  });
});

describe('consentDigest', () => {
  const base = { tool: 't', arguments: { q: 'printer', n: 1 }, destination: { kind: 'mcp', url: 'http://a/mcp' } };
  it('is canonical: key order does not matter', () => {
    expect(consentDigest(base)).toBe(consentDigest({ ...base, arguments: { n: 1, q: 'printer' } }));
    expect(consentDigest(base)).toMatch(/^sha256:[0-9a-f]{64}$/);
  });
  it.each([
    ['another tool', { ...base, tool: 'u' }],
    ['other arguments', { ...base, arguments: { q: 'printer', n: 2 } }],
    ['another destination', { ...base, destination: { kind: 'mcp', url: 'http://b/mcp' } }],
  ])('differs for %s', (_label, other) => {
    expect(consentDigest(other)).not.toBe(consentDigest(base));
  });
});

describe('consentSubjectOf', () => {
  const config = {
    profiles: { agent: { version: '1', route: 'r', prompt: 'p', mcp: [{ server: 'tickets', tools: { search_tickets: { access: 'read' } } }] } },
    mcpServers: { tickets: { transport: 'http', url: 'http://127.0.0.1:9/mcp' } },
    connectors: { notes: { kind: 'http', baseUrl: 'http://notes', target: { system: 'notes', environment: 'prod' }, operations: {} } },
  } as unknown as FleetConfig;
  it('an MCP tool: its server and the server URL', () => {
    expect(consentSubjectOf(config, 'agent', { name: 'tickets__search_tickets' })).toEqual({ tool: 'tickets__search_tickets', source: 'tickets', destination: { kind: 'mcp', server: 'tickets', url: 'http://127.0.0.1:9/mcp' } });
  });
  it('a connector read: its connector, operation and target', () => {
    expect(consentSubjectOf(config, 'agent', { name: 'notes__list', connectorRead: { connector: 'notes', operation: 'list' } })).toEqual({
      tool: 'notes__list',
      operation: 'notes/list',
      source: 'notes',
      destination: { kind: 'connector', connector: 'notes', operation: 'list', target: { system: 'notes', environment: 'prod' } },
    });
  });
  it('a tool the config cannot place is its own destination', () => {
    expect(consentSubjectOf(config, 'agent', { name: 'other' })).toEqual({ tool: 'other', destination: { kind: 'tool', tool: 'other' } });
  });
});

describe('waitOnConsent', () => {
  const ask: ConsentAsk = { gateId: 'g1', existing: false, callId: 'c1', tool: 't', arguments: {}, destination: {}, digest: 'sha256:x', rule: 't', role: 'approver', ttlMs: 1000 };
  it('a consent park names the gate of the first ask', () => {
    const t = waitOnConsent({ kind: 'park', reason: 'consent', detail: { cause: 'consent' }, backoffMs: null, ask: false }, [ask, { ...ask, gateId: 'g2' }]);
    expect(t).toMatchObject({ kind: 'park', reason: 'consent', detail: { cause: 'consent', gateId: 'g1', callId: 'c1', tool: 't' } });
  });
  it('other transitions pass unchanged; a consent park without an ask is a fault', () => {
    expect(waitOnConsent({ kind: 'continue' }, [ask])).toEqual({ kind: 'continue' });
    expect(() => waitOnConsent({ kind: 'park', reason: 'consent', detail: {}, backoffMs: null, ask: false }, [])).toThrow(/no call asked/);
  });
});

describe('fleet config: consent rules name what they decide', () => {
  const config = (rules: Record<string, string>) => ({
    version: 1,
    routes: { r: { adapter: 'scripted', model: 'm', scriptPath: 's.json' } },
    tools: { lookup: { builtin: 'static', description: 'd', output: 'o' } },
    profiles: { agent: { version: '1', route: 'r', prompt: 'p', mcp: [{ server: 'tickets', tools: { search_tickets: { access: 'read' } } }] } },
    mcpServers: { tickets: { transport: 'http', url: 'http://127.0.0.1:9/mcp' } },
    caseTypes: { ticket: { rootProfile: 'agent', scope: { reads: 'all', writes: [], forbidden: [] }, consent: { rules, role: 'approver' } } },
  });
  it('accepts a tool, an MCP tool and an MCP server', () => {
    expect(() => validateFleetConfig(config({ lookup: 'allow', tickets__search_tickets: 'ask', tickets: 'deny' }))).not.toThrow();
  });
  it('refuses an unknown name with its JSON path, and a rule value outside allow|deny|ask', () => {
    let err: unknown;
    try {
      validateFleetConfig(config({ tickets__serch: 'ask' }));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(FleetConfigError);
    expect((err as FleetConfigError).problems.map((p) => p.path)).toEqual(['/caseTypes/ticket/consent/rules/tickets__serch']);
    expect(() => validateFleetConfig(config({ tickets: 'maybe' }))).toThrow(/consent\/rules\/tickets/);
  });
  it('with principals, an ask needs a role some principal holds', () => {
    const principals = { alice: { tokenHash: `sha256:${'a'.repeat(64)}`, roles: ['finance'] } };
    expect(() => validateFleetConfig({ ...config({ tickets: 'ask' }), principals })).toThrow(/\/caseTypes\/ticket\/consent\/role is "approver", which no principal holds/);
    expect(() => validateFleetConfig({ ...config({ tickets: 'deny' }), principals })).not.toThrow();
    const approvers = { alice: { tokenHash: `sha256:${'a'.repeat(64)}`, roles: ['approver'] } };
    expect(() => validateFleetConfig({ ...config({ tickets: 'ask' }), principals: approvers })).not.toThrow();
  });
});
