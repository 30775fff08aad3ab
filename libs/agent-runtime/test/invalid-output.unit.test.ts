/** Invalid model output executes nothing and yields a typed outcome the loop feeds back. */
import { describe, expect, it } from 'vitest';
import { isKernelRefusal } from '@everdict/contracts';
import type { ScriptStep } from '@everdict/llm';
import { answer, harness, probeTool, toolResults } from './harness.js';

const schema = { type: 'object', required: ['id'], properties: { id: { type: 'integer' } }, additionalProperties: false };
const good = { name: 'crm_get', arguments: { id: 1 } };

describe('one action document: all or nothing', () => {
  it.each<[string, ScriptStep, string, string]>([
    ['arguments that are not JSON', { toolCalls: [good, { name: 'crm_update', argumentsText: '{"id": 1,' }] }, 'not_json', 'invalid_action_document'],
    ['an unregistered tool', { toolCalls: [good, { name: 'drop_database', arguments: {} }] }, 'unregistered_tool', 'unregistered_tool'],
    ['arguments the tool schema rejects', { toolCalls: [good, { name: 'crm_update', arguments: { id: 'seven' } }] }, 'invalid_arguments', 'invalid_arguments'],
    ['a tool name outside the document schema', { toolCalls: [good, { name: 'writes.propose', arguments: {} }] }, 'schema', 'invalid_action_document'],
    ['a callId used twice', { toolCalls: [{ ...good, callId: 'dup' }, { name: 'crm_update', arguments: { id: 2 }, callId: 'dup' }] }, 'schema', 'invalid_action_document'],
  ])('%s: nothing runs', async (_c, step, problem, refusal) => {
    const crm_get = probeTool('crm_get', { inputSchema: schema });
    const crm_update = probeTool('crm_update', { access: 'write', inputSchema: schema });
    const h = harness([step, answer('fixed it')], [crm_get, crm_update], { scope: { reads: 'all', writes: ['crm_update'], forbidden: [] } });
    const r = await h.run();
    // Nothing in the document ran: not even the valid call next to the invalid one.
    expect(crm_get.calls).toEqual([]);
    expect(crm_update.calls).toEqual([]);
    expect(h.permission.requests).toEqual([]);
    // Every withheld call is a journal row, settled `refused` with the answer the model got.
    const rows = h.journal.all().filter((c) => c.kind === 'tool');
    expect(rows.map((c) => [c.ordinal, c.name, c.status])).toEqual(('toolCalls' in step ? (step.toolCalls ?? []) : []).map((c, i) => [i + 1, c.name, 'refused']));
    const rejected = r.events.find((e) => e.type === 'action_rejected');
    expect(rejected?.type === 'action_rejected' && rejected.problems.map((p) => p.kind)).toContain(problem);
    // Every call got a typed, attributable answer the model can act on.
    const results = toolResults(r.events);
    expect(results).toHaveLength(2);
    expect(results.every((e) => e.outcome === 'invalid' && e.isError)).toBe(true);
    expect(results.map((e) => e.refusal)).toContain(refusal);
    const fed = r.state.messages.filter((m) => m.role === 'tool');
    expect(fed).toHaveLength(2);
    expect(fed.every((m) => m.role === 'tool' && isKernelRefusal(m.content))).toBe(true);
    expect(rows.map((c) => (c.response as { content: string }).content)).toEqual(fed.map((m) => m.content));
    expect(results.map((e) => e.callId)).toEqual(rows.map((c) => c.callId));
    // The loop went on: the model saw the outcome and answered.
    expect(r.settlement).toEqual({ kind: 'completed', result: 'fixed it' });
  });
});
