/** K3/K6 regressions for bridged tools: declarations first, names carry no authority, remote reads need consent. */
import { describe, expect, it } from 'vitest';
import { permissionRequired } from '@everdict/contracts';
import { bridgedAccess, bridgedEffectsFor, classifyByNamePrefix, MINTING_READ_PATTERNS, type McpAnnotations, type ServerTrust, type ToolDeclaration } from '@everdict/mcp';

describe('name-prefix fallback (compatibility only)', () => {
  it.each([
    ['get_ticket', 'read'],
    ['list_runs', 'read'],
    ['search-docs', 'read'],
    ['update_ticket', 'write'],
    ['exec_in_run', 'write'],
    ['frobnicate', 'write'], // unknown verbs fail closed
    // The minting-read list: names that look like reads but mint. Proof names carry no authority.
    ['get_or_create_ticket', 'write'],
    ['fetch_or_create_user', 'write'],
    ['get_registry_token', 'write'],
    ['get_credentials', 'write'],
    ['read_and_lock_row', 'write'],
    ['get_exec_shell', 'write'],
  ])('%s → %s', (name, access) => {
    expect(classifyByNamePrefix(name)).toBe(access);
  });
  it('the minting list is non-empty and every entry overrides a read prefix', () => {
    expect(MINTING_READ_PATTERNS.length).toBeGreaterThan(0);
  });
});

type Case = [string, ServerTrust, string, McpAnnotations | undefined, ToolDeclaration | undefined, 'read' | 'write', string];

describe('bridgedAccess', () => {
  it.each<Case>([
    ['the author declaration wins over a read-looking annotation', 'workspace', 'get_status', { readOnlyHint: true }, { access: 'write' }, 'write', 'declared'],
    ['the author declaration wins over a name', 'first_party', 'get_or_create_x', undefined, { access: 'read' }, 'read', 'declared'],
    // First-party registration surfaces the gating Action as readOnlyHint: that IS the declaration.
    ['first-party registration annotation: mutating tool named like a read', 'first_party', 'get_run_shell', { readOnlyHint: false }, undefined, 'write', 'registration_annotation'],
    ['first-party registration annotation: read', 'first_party', 'update_view', { readOnlyHint: true }, undefined, 'read', 'registration_annotation'],
    ['first-party undeclared falls back to the name', 'first_party', 'list_cases', undefined, undefined, 'read', 'name_fallback'],
    ['first-party undeclared minting read is a write', 'first_party', 'get_or_create_case', undefined, undefined, 'write', 'name_fallback'],
    // Workspace annotations are self-claims: they never lower a gate, they may raise one.
    ['workspace tool defaults to read-only (bridged default)', 'workspace', 'do_stuff', undefined, undefined, 'read', 'bridged_default'],
    ['workspace readOnlyHint:true is not what makes it a read', 'workspace', 'delete_all', { readOnlyHint: true }, undefined, 'read', 'bridged_default'],
    ['workspace self-claimed mutation is honoured', 'workspace', 'get_thing', { destructiveHint: true }, undefined, 'write', 'self_claimed_mutation'],
  ])('%s', (_c, trust, name, annotations, declaration, access, basis) => {
    expect(bridgedAccess(trust, name, annotations, declaration)).toEqual({ access, basis });
  });
});

describe('bridgedEffectsFor', () => {
  it.each<[string, ServerTrust, 'stdio' | 'remote', 'read' | 'write', ToolDeclaration | undefined, object | undefined, boolean]>([
    ['remote undeclared workspace read: external egress synthesised', 'workspace', 'remote', 'read', undefined, { dataAccess: { egress: 'external' } }, true],
    ['stdio undeclared workspace read: nothing synthesised', 'workspace', 'stdio', 'read', undefined, undefined, false],
    ['the author effects declaration always wins', 'workspace', 'remote', 'read', { access: 'read', effects: { dataAccess: { egress: 'none' } } }, { dataAccess: { egress: 'none' } }, false],
    ['a declaration without effects still gets the structural fact', 'workspace', 'remote', 'read', { access: 'read' }, { dataAccess: { egress: 'external' } }, true],
    ['first-party remote server: the platform itself, nothing synthesised', 'first_party', 'remote', 'read', undefined, undefined, false],
    ['a remote write is gated as a write anyway', 'workspace', 'remote', 'write', undefined, undefined, true],
  ])('%s', (_c, trust, transport, access, declaration, effects, consent) => {
    const e = bridgedEffectsFor(trust, transport, access, declaration);
    expect(e).toEqual(effects);
    expect(permissionRequired({ access, effects: e }).required).toBe(consent);
  });
});
