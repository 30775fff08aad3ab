/** The auditor's own reads (auditReads.ts): which calls may run for an audit at all. */
import { describe, expect, it } from 'vitest';
import { kernelRegistry } from '@everdict/agent-runtime';
import type { Tool } from '@everdict/agent-runtime';
import { auditReadRefusal } from '../src/auditReads.js';

const tool = (name: string, o: Partial<Tool['descriptor']> = {}): Tool => ({
  descriptor: {
    name,
    description: name,
    inputSchema: { type: 'object', additionalProperties: false, required: ['id'], properties: { id: { type: 'string' } } },
    access: 'read',
    origin: 'first_party',
    transport: 'remote',
    argumentValidation: 'kernel',
    ...o,
  },
  invoke: async () => ({ content: 'x' }),
});
const lookup = tool('billing__accounts_get', { connectorRead: { connector: 'billing', operation: 'accounts.get' }, effects: { dataAccess: { egress: 'internal' } } });
const egress = tool('web__fetch', { origin: 'workspace', effects: { dataAccess: { egress: 'external' } } });
const writer = tool('billing__credit', { access: 'write' });
const registry = kernelRegistry([lookup, egress, writer], { intrinsics: [] });
const scope = (reads: readonly string[] | 'all') => ({ scope: { reads, writes: [], forbidden: [] as string[] } }) as never;

describe('auditReadRefusal', () => {
  it('admits a read the case scope authorises, with valid arguments', () => {
    expect(auditReadRefusal(lookup, lookup.descriptor.name, { id: 'a' }, scope(['billing']), registry)).toBeNull();
  });
  it('refuses a tool the auditor does not have, a write, an out-of-scope read, a consent read and bad arguments', () => {
    expect(auditReadRefusal(undefined, 'nope', {}, scope('all'), registry)).toMatch(/not one of the auditor's read tools/);
    expect(auditReadRefusal(writer, writer.descriptor.name, { id: 'a' }, scope('all'), registry)).toMatch(/not a read/);
    expect(auditReadRefusal(lookup, lookup.descriptor.name, { id: 'a' }, scope(['estate']), registry)).toMatch(/outside this case's scope/);
    expect(auditReadRefusal(egress, egress.descriptor.name, { id: 'a' }, scope('all'), registry)).toMatch(/needs consent/);
    expect(auditReadRefusal(lookup, lookup.descriptor.name, { id: 1 }, scope('all'), registry)).toMatch(/arguments of billing__accounts_get are invalid/);
  });
});
