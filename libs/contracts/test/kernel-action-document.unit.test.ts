import { describe, expect, it } from 'vitest';
import { schemaValidator, type ActionDocument } from '@everdict/contracts';

const validate = schemaValidator('action-document.schema.json');
const call = { kind: 'tool_call', callId: 'c1', tool: 'crm_get', arguments: { id: 1 } };

describe('action-document.schema.json', () => {
  it('accepts a final answer and a list of tool calls', () => {
    const final: ActionDocument = { text: 'done', actions: [] };
    expect(validate(final)).toBe(true);
    expect(validate({ text: null, actions: [call] })).toBe(true);
  });
  it.each([
    ['missing actions', { text: 'x' }],
    ['arguments not an object', { text: null, actions: [{ ...call, arguments: 'id=1' }] }],
    ['arguments null (unparsable JSON)', { text: null, actions: [{ ...call, arguments: null }] }],
    ['tool name outside the provider alphabet', { text: null, actions: [{ ...call, tool: 'writes.propose' }] }],
    ['unknown action kind', { text: null, actions: [{ ...call, kind: 'shell' }] }],
    ['extra top-level field', { text: null, actions: [], status: 'done' }],
  ])('rejects %s', (_c, doc) => {
    expect(validate(doc)).toBe(false);
  });
});
