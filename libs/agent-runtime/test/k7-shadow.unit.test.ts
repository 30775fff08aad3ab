/** K7: shadow mode is enforced at the invocation point and binds sub-agents. */
import { describe, expect, it } from 'vitest';
import type { ExecutionMode } from '@everdict/contracts';
import { inProcessSubAgents, type RunResult } from '@everdict/agent-runtime';
import { answer, call, harness, probeTool, scriptModel, toolResults } from './harness.js';

const SHADOW: ExecutionMode = { kind: 'shadow', executableReads: ['crm_get'] };

function tools() {
  return {
    crm_get: probeTool('crm_get'), // first-party read the host attests
    crm_search: probeTool('crm_search'), // first-party read the host did not attest
    // A third-party server's tool: bridged read-only by default, but it files a ticket.
    tickets__get_or_create_ticket: probeTool('tickets__get_or_create_ticket', { origin: 'workspace', transport: 'stdio', argumentValidation: 'server' }),
    crm_update: probeTool('crm_update', { access: 'write' }),
  };
}
const SCOPE = { reads: 'all' as const, writes: ['crm_update'], forbidden: [] };

describe('K7 shadow mode', () => {
  it.each<[string, string, boolean]>([
    ['an attested first-party read runs', 'crm_get', true],
    ['an unattested first-party read is captured', 'crm_search', false],
    ['a third-party get_or_create_* is captured, not called', 'tickets__get_or_create_ticket', false],
    ['a write is captured without asking the permission hook', 'crm_update', false],
  ])('%s', async (_c, name, runs) => {
    const t = tools();
    const h = harness([call([name, { subject: 'x' }]), answer('done')], Object.values(t), { scope: SCOPE, mode: SHADOW });
    const r = await h.run();
    expect(t[name as keyof typeof t].calls.length).toBe(runs ? 1 : 0);
    const result = toolResults(r.events)[0]!;
    if (runs) {
      expect(result).toMatchObject({ outcome: 'ok', isError: false });
    } else {
      expect(result).toMatchObject({ outcome: 'shadow_denied', refusal: 'shadow_denied', isError: true });
      expect(r.events).toContainEqual(expect.objectContaining({ type: 'shadow_intent', tool: name, arguments: { subject: 'x' } }));
      expect(h.journal.all().find((c) => c.name === name)?.status).toBe('shadowed');
    }
    // The hook is never the thing that bounds a shadow run.
    expect(h.permission.requests).toEqual([]);
  });

  it('intrinsic cognition still runs in shadow mode', async () => {
    const h = harness([call(['todo', { items: [] }]), answer('done')], [], { mode: SHADOW });
    expect(toolResults((await h.run()).events)[0]?.outcome).toBe('ok');
  });

  it('the mode binds sub-agents', async () => {
    const t = tools();
    let child: RunResult | undefined;
    const h = harness([call(['spawn', { objective: 'look around' }]), answer('done')], Object.values(t), {
      scope: SCOPE,
      mode: SHADOW,
      subAgents: (parentTools, deps) =>
        inProcessSubAgents({
          deps,
          parentTools,
          childModel: () => scriptModel([call(['crm_get', {}], ['tickets__get_or_create_ticket', {}]), answer('child done')], 'child'),
          onChildSettled: (_id, r) => (child = r),
        }),
    });
    await h.run();
    expect(t.crm_get.calls).toHaveLength(1);
    expect(t.tickets__get_or_create_ticket.calls).toEqual([]);
    expect(toolResults(child!.events).map((e) => e.outcome)).toEqual(['ok', 'shadow_denied']);
  });

  it('absent mode is live and byte-identical to an explicit live mode', async () => {
    const script = [call(['crm_get', {}], ['crm_update', { n: 1 }], ['todo', { items: [] }]), answer('done')];
    const a = await harness(script, Object.values(tools()), { scope: SCOPE }).run();
    const b = await harness(script, Object.values(tools()), { scope: SCOPE, mode: { kind: 'live' } }).run();
    expect(JSON.stringify(b.events)).toBe(JSON.stringify(a.events));
    expect(JSON.stringify(b.state)).toBe(JSON.stringify(a.state));
    expect(a.events.some((e) => e.type === 'shadow_intent')).toBe(false);
  });
});
