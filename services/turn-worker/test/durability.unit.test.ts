import { describe, expect, it } from 'vitest';
import type { ToolDescriptor } from '@everdict/contracts';
import { mayDeferIntents, mayFoldIntents } from '../src/durability.js';
import { builtinTool } from '../src/tools.js';

const local = builtinTool('lookup', { builtin: 'static', description: 'Look up.' }, { timing: () => undefined }).descriptor;
const remoteRead: ToolDescriptor = { ...local, name: 'crm_read', transport: 'remote', effects: { dataAccess: { egress: 'internal' } } };
const egress: ToolDescriptor = { ...local, name: 'web_fetch', effects: { dataAccess: { egress: 'external' } } };
const workspace: ToolDescriptor = { ...local, name: 'ws_tool', origin: 'workspace' };
const write: ToolDescriptor = { ...local, name: 'billing', access: 'write' };
const propose: ToolDescriptor = { ...write, name: 'writes__propose', outcomeAtomic: true };
const todo: ToolDescriptor = { ...local, name: 'todo', origin: 'kernel', intrinsic: true };
const all = new Map([local, remoteRead, egress, workspace, write, propose, todo].map((d) => [d.name, d]));
const registry = { descriptor: (name: string) => all.get(name) };

describe('which C2 may commit without waiting for the WAL flush', () => {
  it('defers intents of first-party in-process reads, intrinsics and host-held proposals only', () => {
    expect(mayDeferIntents(registry, [])).toBe(true);
    expect(mayDeferIntents(registry, ['lookup', 'todo', 'writes__propose'])).toBe(true);
  });

  it('keeps a C2 synchronous when any call can be observed outside the process, or is unknown', () => {
    for (const name of ['crm_read', 'web_fetch', 'ws_tool', 'billing', 'hallucinated']) {
      expect(mayDeferIntents(registry, ['lookup', name]), name).toBe(false);
    }
  });

  it('folds a deferrable batch only when no journalled outcome waits on its write', () => {
    expect(mayFoldIntents(true, 0)).toBe(true);
    // A completed remote read must be durable before the next batch runs (replayed, never rerun).
    expect(mayFoldIntents(true, 1)).toBe(false);
    expect(mayFoldIntents(false, 0)).toBe(false);
  });
});
