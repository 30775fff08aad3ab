/** K4: sub-agents shrink, never escape. */
import { describe, expect, it } from 'vitest';
import { childRegistry, childToolNames, inProcessSubAgents, type RunResult, type SpawnRequest } from '@everdict/agent-runtime';
import type { ScriptStep } from '@everdict/llm';
import { answer, call, harness, probeTool, scriptModel, toolResults } from './harness.js';

const SCOPE = { reads: ['read_a', 'read_consent', 'read_forbidden'], writes: ['write_c'], forbidden: ['read_forbidden'] };

function tools() {
  return {
    read_a: probeTool('read_a'),
    read_b: probeTool('read_b'), // a read the parent's scope does not admit
    read_consent: probeTool('read_consent', { effects: { dataAccess: { egress: 'external' } } }),
    read_forbidden: probeTool('read_forbidden'),
    write_c: probeTool('write_c', { access: 'write' }),
  };
}

/** A parent that spawns once with `spawnArgs`; the child runs `childSteps`. */
async function spawnOnce(spawnArgs: Record<string, unknown>, childSteps: ScriptStep[], over: { budget?: object } = {}) {
  const t = tools();
  const children: { req: SpawnRequest; result: RunResult }[] = [];
  let lastReq: SpawnRequest | undefined;
  const h = harness([call(['spawn', spawnArgs]), answer('parent done')], Object.values(t), {
    scope: SCOPE,
    ...over,
    subAgents: (parentTools, deps) =>
      inProcessSubAgents({
        deps,
        parentTools,
        childModel: (req) => {
          lastReq = req;
          return scriptModel(childSteps, 'child');
        },
        onChildSettled: (_id, result) => children.push({ req: lastReq!, result }),
      }),
  });
  const r = await h.run();
  return { t, h, r, child: children[0]! };
}

describe('K4 child registry = parent read-only tools ∩ parent scope', () => {
  it.each<[string, string[] | undefined, string[]]>([
    ['nothing requested: every delegable read', undefined, ['read_a', 'read_consent']],
    ['a subset', ['read_a'], ['read_a']],
    ['a write is never delegated', ['read_a', 'write_c'], ['read_a']],
    ['a read outside the parent scope is never delegated', ['read_b'], []],
    ['a forbidden read is never delegated', ['read_forbidden'], []],
  ])('%s', (_c, requested, expected) => {
    const h = harness([], Object.values(tools()), { scope: SCOPE });
    const names = childToolNames(h.tools, h.ctx.envelope, requested);
    expect(names).toEqual(expected);
    // Listing a name that is not delegable cannot smuggle it into the child registry.
    const reg = childRegistry(h.tools, h.ctx.envelope, ['read_a', 'write_c', 'read_b']);
    expect(reg.baseTools.map((x) => x.descriptor.name)).toEqual(['read_a']);
  });

  it.each([
    ['the write it asked for', 'write_c'],
    ['a read outside the scope', 'read_b'],
  ])('a child can never call %s', async (_c, tool) => {
    const { t, child } = await spawnOnce({ objective: 'try it', tools: ['read_a', tool] }, [call([tool, {}]), answer('child done')]);
    expect(t[tool as keyof typeof t].calls).toEqual([]);
    expect(toolResults(child.result.events)[0]).toMatchObject({ tool, outcome: 'invalid', refusal: 'unregistered_tool' });
  });

  it('the parent envelope binds the child verbatim; spawn arguments cannot widen it', async () => {
    const { h, child } = await spawnOnce({ objective: 'widen', tools: ['write_c'], scope: { writes: ['*'] } } as Record<string, unknown>, [answer('x')]);
    // `scope` is not a spawn argument: the whole spawn is invalid and nothing is placed.
    expect(child).toBeUndefined();
    const ok = await spawnOnce({ objective: 'read only', tools: ['read_a'] }, [call(['read_a', {}]), answer('child done')]);
    expect(ok.child.req.envelope).toBe(ok.h.ctx.envelope);
    expect(ok.t.read_a.calls).toHaveLength(1);
    expect(h.ctx.envelope.scope.writes).toEqual(['write_c']);
  });

  it('per-run budgets re-count from zero in the child', async () => {
    // The parent may take 2 turns; the child takes 2 turns of its own under the same limits.
    const { r, child } = await spawnOnce({ objective: 'two turns' }, [call(['read_a', {}]), answer('child done')], { budget: { maxTurns: 2 } });
    expect(child.result.settlement).toEqual({ kind: 'completed', result: 'child done' });
    expect(child.result.state.usage.turns).toBe(2);
    expect(child.req.envelope.budget).toEqual({ maxTurns: 2 });
    expect(r.settlement).toEqual({ kind: 'completed', result: 'parent done' });
  });

  it('a child of a child still cannot exceed the root', async () => {
    const t = tools();
    const seen: string[][] = [];
    const h = harness([call(['spawn', { objective: 'level 1' }]), answer('root done')], Object.values(t), {
      scope: SCOPE,
      subAgents: (parentTools, deps) =>
        inProcessSubAgents({
          deps,
          parentTools,
          childModel: (req) => {
            seen.push([...req.toolNames]);
            return scriptModel(req.depth === 1 ? [call(['spawn', { objective: 'level 2', tools: ['write_c', 'read_a'] }]), answer('l1 done')] : [answer('l2 done')], `d${req.depth}`);
          },
        }),
    });
    const r = await h.run();
    expect(r.settlement.kind).toBe('completed');
    expect(seen).toEqual([['read_a', 'read_consent'], ['read_a']]);
  });
});
