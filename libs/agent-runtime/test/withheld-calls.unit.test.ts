/**
 * K8 and the journal: every call the kernel withholds is a journal row under task + turn +
 * ordinal — `refused` or `shadowed`, its id allocated before the decision, its response the
 * refusal the model was told — and is never executed. A withheld call is recorded settled
 * (`recordWithheld`, no open intent first), except one the permission hook denies: the hook is
 * asked only after the call's intent is open. On a re-run of the turn the journal is the answer:
 * a recorded refusal is folded in, never decided again.
 */
import { describe, expect, it } from 'vitest';
import { KERNEL_REFUSALS, type ExecutionMode } from '@everdict/contracts';
import { kernelRegistry, runTurn, type CallRecord, type Journal, type ToolCallRecord } from '@everdict/agent-runtime';
import { answer, call, harness, probeTool, toolResults } from './harness.js';

const rowsOf = (all: CallRecord[]) => all.filter((c) => c.kind === 'tool');
const refusalOf = (c: CallRecord | undefined) => (c?.response as ToolCallRecord | null)?.refusal ?? null;

/** Counts how each tool call reached the journal. */
function countingJournal(inner: Journal): Journal & { intents: number[]; withheld: number[] } {
  const j = {
    intents: [] as number[],
    withheld: [] as number[],
    recordIntent: (i: Parameters<Journal['recordIntent']>[0]) => (i.ordinal > 0 && j.intents.push(i.ordinal), inner.recordIntent(i)),
    recordOutcome: (k: Parameters<Journal['recordOutcome']>[0], o: Parameters<Journal['recordOutcome']>[1]) => inner.recordOutcome(k, o),
    recordWithheld: (i: Parameters<Journal['recordWithheld']>[0], o: Parameters<Journal['recordWithheld']>[1]) => (j.withheld.push(i.ordinal), inner.recordWithheld(i, o)),
  };
  return j;
}

function tools() {
  return {
    crm_get: probeTool('crm_get'),
    crm_search: probeTool('crm_search'),
    secrets_read: probeTool('secrets_read'),
    crm_update: probeTool('crm_update', { access: 'write' }),
  };
}
const SCOPE = { reads: ['crm_get', 'secrets_read'], writes: ['crm_update'], forbidden: ['secrets_*'] };

describe('withheld calls are journal rows', () => {
  it('out of scope, forbidden and permission-denied calls are `refused` rows with the refusal the model was told; none runs', async () => {
    const t = tools();
    const h = harness([call(['crm_get', {}], ['crm_search', {}], ['secrets_read', {}], ['crm_update', { id: 1 }]), answer('done')], Object.values(t), {
      scope: SCOPE,
      permission: () => ({ decision: 'deny', reason: 'not today' }),
    });
    const journal = countingJournal(h.journal);
    const r = await runTurn({ ...h.deps, journal }, h.ctx, h.start);
    expect(t.crm_get.calls).toHaveLength(1);
    expect([t.crm_search, t.secrets_read, t.crm_update].map((x) => x.calls.length)).toEqual([0, 0, 0]);
    const rows = rowsOf(h.journal.all());
    expect(rows.map((c) => [c.ordinal, c.name, c.status, refusalOf(c)])).toEqual([
      [1, 'crm_get', 'completed', null],
      [2, 'crm_search', 'refused', 'read_out_of_scope'],
      [3, 'secrets_read', 'refused', 'forbidden'],
      [4, 'crm_update', 'refused', 'permission_denied'],
    ]);
    // The response paper carries exactly what the model was fed, and the events name the rows.
    const fed = r.state.messages.filter((m) => m.role === 'tool').map((m) => m.content);
    expect(rows.map((c) => (c.response as ToolCallRecord).content)).toEqual(fed);
    expect(fed[1]!.startsWith(KERNEL_REFUSALS.read_out_of_scope)).toBe(true);
    expect(toolResults(r.events).map((e) => [e.callId, e.refusal])).toEqual(rows.map((c) => [c.callId, refusalOf(c)]));
    // Scope refusals are decided on sight and recorded settled; the hook's call had its intent open first.
    expect(journal.withheld).toEqual([2, 3]);
    expect(journal.intents).toEqual([1, 4]);
  });

  it('a literal call of a tool that is not offered is a `refused` row, and so is every other call of that document', async () => {
    const t = tools();
    const h = harness([call(['crm_get', {}], ['drop_database', { really: true }]), answer('done')], Object.values(t), { scope: SCOPE });
    const journal = countingJournal(h.journal);
    const r = await runTurn({ ...h.deps, journal }, h.ctx, h.start);
    expect(t.crm_get.calls).toEqual([]);
    const rows = rowsOf(h.journal.all());
    expect(rows.map((c) => [c.ordinal, c.name, c.status, refusalOf(c)])).toEqual([
      [1, 'crm_get', 'refused', 'invalid_action_document'],
      [2, 'drop_database', 'refused', 'unregistered_tool'],
    ]);
    expect(rows[1]!.request).toEqual({ tool: 'drop_database', arguments: { really: true } });
    expect((rows[1]!.response as ToolCallRecord).content.startsWith(KERNEL_REFUSALS.unregistered_tool)).toBe(true);
    expect(journal.intents).toEqual([]);
    expect(toolResults(r.events).map((e) => e.callId)).toEqual(rows.map((c) => c.callId));
  });

  it('a call shadow mode captures is a `shadowed` row carrying shadow_denied', async () => {
    const t = tools();
    const mode: ExecutionMode = { kind: 'shadow', executableReads: ['crm_get'] };
    const h = harness([call(['crm_get', {}], ['crm_update', { id: 2 }]), answer('done')], Object.values(t), { scope: SCOPE, mode });
    const r = await runTurn(h.deps, h.ctx, h.start);
    expect(t.crm_update.calls).toEqual([]);
    const rows = rowsOf(h.journal.all());
    expect(rows.map((c) => [c.name, c.status, refusalOf(c)])).toEqual([
      ['crm_get', 'completed', null],
      ['crm_update', 'shadowed', 'shadow_denied'],
    ]);
    expect(r.events).toContainEqual(expect.objectContaining({ type: 'shadow_intent', callId: rows[1]!.callId, tool: 'crm_update' }));
  });
});

describe('a recorded refusal is the answer on a re-run of the turn', () => {
  it('a scope refusal stands even when the scope would now admit the call', async () => {
    const t = tools();
    const h = harness([call(['crm_search', {}]), answer('done')], Object.values(t), { scope: SCOPE });
    await runTurn(h.deps, h.ctx, h.start);
    const before = h.journal.all();
    const wider = { ...h.ctx, envelope: { ...h.ctx.envelope, scope: { ...SCOPE, reads: 'all' as const } } };
    const again = await runTurn(h.deps, wider, h.start);
    expect(t.crm_search.calls).toEqual([]);
    expect(h.journal.all()).toEqual(before);
    expect(toolResults(again.events)).toEqual([expect.objectContaining({ callId: before[1]!.callId, refusal: 'read_out_of_scope', replayed: true })]);
  });

  it('an unregistered-tool refusal stands even when the registry now holds the tool', async () => {
    const t = tools();
    const h = harness([call(['crm_get', {}], ['crm_export', {}]), answer('done')], [t.crm_get], { scope: { ...SCOPE, reads: 'all' } });
    await runTurn(h.deps, h.ctx, h.start);
    const before = h.journal.all();
    // The registry now resolves the name (the tools the model is shown, so its request, unchanged).
    const exporter = probeTool('crm_export');
    const now = kernelRegistry([t.crm_get, exporter]);
    const resolving = { ...h.tools, descriptor: now.descriptor, handler: now.handler, argumentProblems: now.argumentProblems };
    const again = await runTurn({ ...h.deps, tools: resolving }, h.ctx, h.start);
    expect([t.crm_get.calls.length, exporter.calls.length]).toEqual([0, 0]);
    expect(h.journal.all()).toEqual(before);
    expect(toolResults(again.events).map((e) => [e.refusal, e.replayed])).toEqual([
      ['invalid_action_document', true],
      ['unregistered_tool', true],
    ]);
  });

  it('an open intent an earlier attempt left for a write that is now refused settles `unknown`, never `refused`', async () => {
    const t = tools();
    const h = harness([call(['crm_update', { id: 3 }]), answer('done')], Object.values(t), { scope: { ...SCOPE, writes: [] } });
    await h.journal.recordIntent({ taskId: 'task-root', turn: 0, ordinal: 1, callId: 'earlier-attempt', kind: 'tool', name: 'crm_update', request: {}, requestHash: 'sha256:x' });
    const r = await runTurn(h.deps, h.ctx, h.start);
    expect(t.crm_update.calls).toEqual([]);
    expect(h.journal.get({ taskId: 'task-root', turn: 0, ordinal: 1 })).toMatchObject({ callId: 'earlier-attempt', status: 'unknown' });
    expect(toolResults(r.events)[0]).toMatchObject({ callId: 'earlier-attempt', outcome: 'unknown', refusal: 'outcome_unknown' });
  });
});
