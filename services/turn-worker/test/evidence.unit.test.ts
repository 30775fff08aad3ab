/**
 * Evidence with provenance (evidence.ts): what a citation names, which journal rows may be
 * cited, what the auditor is shown of each, and that the packet's digest binds the citations.
 */
import { describe, expect, it } from 'vitest';
import { packetDigest, payloadHash, sealPacket } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import { callEvidence, citedCallProblem, EVIDENCE_SHOWN_CHARS, paperEvidence, parseCitation, toolOrigins } from '../src/evidence.js';
import type { CitedCall } from '../src/evidence.js';
import { auditSubject, parseVerdict } from '../src/auditor.js';
import { buildPacket } from '../src/proposal.js';

const TASK = '01a22950-1893-7572-9384-43fcdddac735';
const CALL = '01a22950-1893-7572-9384-43fcdddac736';
const row = (o: Partial<CitedCall> = {}): CitedCall => ({
  id: CALL,
  task_id: TASK,
  turn: 2,
  ordinal: 1,
  kind: 'read',
  tool_name: 'billing__accounts_get',
  status: 'completed',
  completed_at: new Date('2026-12-01T10:00:00Z'),
  response: { content: '{}', outcome: 'ok', offloadedRef: null },
  ...o,
});

describe('parseCitation', () => {
  it('tells journal ids, stored-result refs, paper names and model tool-call ids apart', () => {
    expect(parseCitation(CALL)).toEqual({ kind: 'journal', callId: CALL, orPaper: null });
    expect(parseCitation(`result:${CALL}`)).toEqual({ kind: 'journal', callId: CALL, orPaper: `result:${CALL}` });
    expect(parseCitation(`results/${TASK}/result:${CALL}`)).toEqual({ kind: 'paper', ref: `results/${TASK}/result:${CALL}` });
    expect(parseCitation('call_abc123')).toEqual({ kind: 'model', toolCallId: 'call_abc123' });
  });
});

describe('citedCallProblem', () => {
  it('admits only a completed read of the proposing task with a result', () => {
    expect(citedCallProblem(row(), TASK, 'evidence[0]', '"x"')).toBeNull();
    expect(citedCallProblem(undefined, TASK, 'evidence[0]', '"x"')).toMatch(/^evidence\[0\] \("x"\) names no call of this task/);
    expect(citedCallProblem(row({ task_id: CALL }), TASK, 'evidence[1]', '"x"')).toMatch(/^evidence\[1\].*names no call of this task/);
    expect(citedCallProblem(row({ kind: 'control', tool_name: 'plan' }), TASK, 'evidence[0]', '"x"')).toMatch(/not a read/);
    expect(citedCallProblem(row({ kind: 'effect', tool_name: 'writes__propose' }), TASK, 'evidence[0]', '"x"')).toMatch(/not a read/);
    expect(citedCallProblem(row({ status: 'refused', response: { outcome: 'refused' } }), TASK, 'evidence[0]', '"x"')).toMatch(/did not complete with a result \(refused, refused\)/);
    expect(citedCallProblem(row({ status: 'intent', response: null }), TASK, 'evidence[0]', '"x"')).toMatch(/did not complete/);
    expect(citedCallProblem(row({ status: 'completed', response: { outcome: 'tool_error' } }), TASK, 'evidence[0]', '"x"')).toMatch(/did not complete/);
  });
});

describe('callEvidence: provenance from the tool, never from the content', () => {
  const doc = { origin: { connector: 'billing', operation: 'accounts.get', target: { system: 'billing', environment: 'test' } }, trust: 'external', dataClass: 'estate', contentHash: 'x', bytes: 1, truncated: false, observedAt: '2026-12-01T10:00:00.000Z', result: { balanceCents: 1200 } };

  it("shows a connector read's origin, target and result with the hash recomputed over the result", () => {
    const item = callEvidence(row(), JSON.stringify(doc), { kind: 'connector', connector: 'billing', operation: 'accounts.get' });
    expect(item.citation).toEqual({ kind: 'call', ref: CALL, tool: 'billing__accounts_get', contentHash: payloadHash({ balanceCents: 1200 }) });
    expect(item.provenance).toMatchObject({
      source: 'journal_call',
      callId: CALL,
      origin: { connector: 'billing', operation: 'accounts.get', target: { system: 'billing', environment: 'test' } },
      trust: 'external',
      dataClass: 'estate',
      truncated: false,
      observedAt: doc.observedAt,
    });
    expect(item.content).toEqual({ balanceCents: 1200 });
  });

  it('does not believe a connector-shaped document from any other tool', () => {
    const item = callEvidence(row({ tool_name: 'kb__search' }), JSON.stringify(doc), { kind: 'mcp', server: 'kb', tool: 'search', transport: 'http' });
    expect(item.provenance.origin).toEqual({ mcpServer: 'kb', tool: 'search', transport: 'http' });
    expect(item.provenance.trust).toBe('external');
    expect(item.content).toBe(JSON.stringify(doc));
  });

  it('marks what the auditor is shown only in part, hashing the whole', () => {
    const big = 'x'.repeat(EVIDENCE_SHOWN_CHARS + 10);
    const item = callEvidence(row({ tool_name: 'echo' }), big, undefined);
    expect(item.provenance).toMatchObject({ truncated: true, bytes: big.length, origin: { tool: 'echo' } });
    expect((item.content as string).length).toBe(EVIDENCE_SHOWN_CHARS);
    expect(paperEvidence('results/t/result:c', Buffer.from('{"a":1}')).provenance).toMatchObject({ source: 'paper', trust: 'external', truncated: false, bytes: 7 });
  });
});

describe('toolOrigins', () => {
  it('maps connector reads and MCP tools of every profile to their declared origin', () => {
    const config = {
      profiles: { a: { reads: ['billing/accounts.get'], mcp: [{ server: 'kb', tools: { search: { access: 'read' } } }] } },
      mcpServers: { kb: { transport: 'http', url: 'http://127.0.0.1:1/mcp' } },
    } as unknown as Pick<FleetConfig, 'profiles' | 'mcpServers'>;
    const origins = toolOrigins(config);
    expect(origins.get('billing__accounts_get')).toEqual({ kind: 'connector', connector: 'billing', operation: 'accounts.get' });
    expect(origins.get('kb__search')).toEqual({ kind: 'mcp', server: 'kb', tool: 'search', transport: 'http' });
  });
});

describe('the packet carries the citations and its digest binds them', () => {
  const fleet = {
    connectors: { billing: { kind: 'http', target: { system: 'billing', environment: 'test' }, operations: { 'accounts.credit': { access: 'write', effectClass: 'payment', params: { accountId: { type: 'string' } } } } } },
  } as unknown as Pick<FleetConfig, 'connectors'>;
  const args = { planStepId: 's1', connector: 'billing', operation: 'accounts.credit', params: { accountId: 'a1' }, summary: 'credit', revert: { kind: 'manual' as const, description: 'by hand' } };
  const base = { caseId: '01a22950-1893-7572-9384-43fcdddac734', envelope: { scope: { reads: 'all' as const, writes: ['billing'], forbidden: [] } }, fleet, plan: null };
  const cite = (hash: string) => [{ kind: 'call' as const, ref: CALL, tool: 'billing__accounts_get', contentHash: hash }];

  it('changes the digest when the cited evidence changes', () => {
    const a = buildPacket(args, { accountId: 'a1' }, { ...base, evidence: cite(`sha256:${'a'.repeat(64)}`) });
    const b = buildPacket(args, { accountId: 'a1' }, { ...base, evidence: cite(`sha256:${'b'.repeat(64)}`) });
    const none = buildPacket(args, { accountId: 'a1' }, base);
    expect(a.ok && b.ok && none.ok).toBe(true);
    if (!a.ok || !b.ok || !none.ok) return;
    expect(a.packet.evidence).toEqual(cite(`sha256:${'a'.repeat(64)}`));
    expect(none.packet.evidence).toBeUndefined();
    expect(packetDigest(a.packet)).not.toBe(packetDigest(b.packet));
    expect(packetDigest(a.packet)).not.toBe(packetDigest(none.packet));
    // What the auditor is first shown: the packet and the evidence, nothing of the author.
    const subject = JSON.parse(auditSubject(sealPacket(a.packet), [])) as Record<string, unknown>;
    expect(Object.keys(subject).sort()).toEqual(['evidence', 'packet']);
  });

  it('keeps the fail-closed verdict parsing', () => {
    expect(parseVerdict('sure', 'aud@1').verdict).toBe('reject');
    expect(parseVerdict('{"verdict":"approve","reason":"ok"}', 'aud@1')).toEqual({ verdict: 'approve', reason: 'ok', by: 'aud@1' });
  });
});
