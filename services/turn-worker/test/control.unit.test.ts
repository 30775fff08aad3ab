/**
 * Pure decisions of the control paths: a child's papers and grants never exceed its parent's
 * (§3), a wait that answers sub-agents goes through the question protocol, and an operator's
 * resume withdraws a soft stop only (§7).
 */
import { describe, expect, it } from 'vitest';
import { heldAuthority, narrowForChild, refNames } from '../src/authority.js';
import { resumeAction, settle } from '../src/decisions.js';
import type { SettleInput } from '../src/decisions.js';

const P = '01900000-0000-7000-8000-0000000000a1';
const GP = '01900000-0000-7000-8000-0000000000a0';
const own = (ref: string) => `results/${P}/${ref}`;
const given = `results/${GP}/result:gp-1`;

describe('a child’s papers and grants', () => {
  const root = heldAuthority({ parent_id: null, context: null }, ['read:logs', 'read:db', 'read:logs']);
  const child = heldAuthority({ parent_id: GP, context: { permittedPapers: [given], grants: ['read:logs'] } }, ['ignored']);

  it('a root holds its case type’s grants and no paper beyond its own results; a child what its context says', () => {
    expect(root).toEqual({ permittedPapers: [], grants: ['read:logs', 'read:db'] });
    expect(child).toEqual({ permittedPapers: [given], grants: ['read:logs'] });
    expect(heldAuthority({ parent_id: GP, context: { permittedPapers: 'all', grants: [7] } }, [])).toEqual({ permittedPapers: [], grants: [] });
  });

  it('names a paper by its full name or, for a stored result, by its ref', () => {
    expect(refNames('result:gp-1', given)).toBe(true);
    expect(refNames(given, given)).toBe(true);
    expect(refNames('gp-1', given)).toBe(false);
    expect(refNames('result:gp-1', 'tasks/x/result:gp-1')).toBe(false);
  });

  it('gives the papers the spawn names that the parent may read, and withholds the rest', () => {
    const n = narrowForChild(P, child, { papers: ['result:mine', 'result:gp-1', 'tasks/x/state/1', `results/${GP}/result:other`], grants: null });
    expect(n.context.permittedPapers).toEqual([given, own('result:mine')].sort());
    expect(n.withheld.papers).toEqual(['tasks/x/state/1', `results/${GP}/result:other`]);
  });

  it('gives the parent’s given papers (never its own results) when the spawn names none', () => {
    expect(narrowForChild(P, child, { papers: null, grants: null }).context.permittedPapers).toEqual([given]);
    expect(narrowForChild(P, root, {}).context.permittedPapers).toEqual([]);
  });

  it('gives the grants asked for that the parent holds, none by default', () => {
    const n = narrowForChild(P, root, { grants: ['read:db', 'write:prod', 'read:db'] });
    expect(n.context.grants).toEqual(['read:db']);
    expect(n.withheld.grants).toEqual(['write:prod']);
    expect(narrowForChild(P, root, { grants: null }).context.grants).toEqual([]);
    // Never more than the parent, whatever is asked.
    expect(narrowForChild(P, child, { grants: ['read:db', 'read:logs'] }).context.grants).toEqual(['read:logs']);
  });
});

describe('parks through the question protocol', () => {
  const base: SettleInput = { settlement: null, cancelRequested: null, release: false, unreportedChildren: 1, route: 'main', backoffAttempt: 1, backoffMs: () => 100 };
  it('a wait for children that answers sub-agents asks; one that does not stays on the hot path', () => {
    expect(settle({ ...base, settlement: { kind: 'suspended', parkReason: 'children', cause: 'wait', handoff: 'published', answers: 2 } })).toMatchObject({ kind: 'park', reason: 'children', ask: true });
    expect(settle({ ...base, settlement: { kind: 'suspended', parkReason: 'children', cause: 'wait', handoff: 'published' } })).toMatchObject({ kind: 'park', reason: 'children', ask: false });
    expect(settle({ ...base, settlement: { kind: 'suspended', parkReason: 'question', cause: 'wait', handoff: 'published', answers: 1 } })).toMatchObject({ kind: 'park', reason: 'question', ask: true });
  });
});

describe('an operator’s resume', () => {
  const t = (over: Partial<Parameters<typeof resumeAction>[0]>) => resumeAction({ state: 'running', park_reason: null, park_detail: null, cancel_requested: null, ...over });
  it('wakes a task parked on its soft stop and withdraws a pending one', () => {
    expect(t({ state: 'parked', park_reason: 'gate', park_detail: { kind: 'soft_cancel' }, cancel_requested: 'soft' })).toBe('wake');
    expect(t({ cancel_requested: 'soft' })).toBe('withdraw');
    expect(t({ state: 'parked', park_reason: 'question', park_detail: { questionId: 'q' }, cancel_requested: 'soft' })).toBe('withdraw');
  });
  it('never undoes a hard cancel, never wakes a gate that waits on a decision', () => {
    expect(t({ state: 'cancelled', cancel_requested: 'hard' })).toBe('nothing');
    expect(t({ state: 'parked', park_reason: 'gate', park_detail: { kind: 'soft_cancel' }, cancel_requested: 'hard' })).toBe('nothing');
    expect(t({ state: 'parked', park_reason: 'gate', park_detail: { kind: 'effect', gateId: 'g' } })).toBe('nothing');
    expect(t({ state: 'done' })).toBe('nothing');
  });
});
