import { describe, expect, it } from 'vitest';
import { parseCron, parseIntakeSources, slotsBetween, taskTree } from '../src/index.js';

const row = (id: string, parent: string | null) => ({
  id,
  parent_id: parent,
  profile: 'p',
  state: 'open' as const,
  park_reason: null,
  budget_limit_minutes: parent === null ? '45' : null,
  budget_used_minutes: '1.5',
  created_at: new Date('2026-11-29T00:00:00Z'),
  updated_at: new Date('2026-11-29T00:00:00Z'),
});

describe('taskTree', () => {
  it('nests children under their parents in row order; an unknown parent makes a root', () => {
    const tree = taskTree([row('a', null), row('b', 'a'), row('c', 'b'), row('d', 'a'), row('e', 'zzz')]);
    expect(tree.map((n) => n.id)).toEqual(['a', 'e']);
    expect(tree[0]!.children.map((n) => n.id)).toEqual(['b', 'd']);
    expect(tree[0]!.children[0]!.children.map((n) => n.id)).toEqual(['c']);
    expect(tree[0]!.budget).toEqual({ limitMinutes: 45, usedMinutes: 1.5 });
  });
});

describe('parseIntakeSources', () => {
  const doc = {
    webhooks: [{ name: 'gh', caseType: 'support', secretsEnv: ['GH_SECRET'], signature: { kind: 'github' }, mapping: { kind: 'github-issues' } }],
    mailboxes: [{ account: 'a@example.com', host: 'imap', port: 993, user: 'a', passwordEnv: 'IMAP_PASS', caseType: 'support' }],
  };

  it('resolves secrets from the environment and keeps the names out of the result', () => {
    const s = parseIntakeSources(doc, { GH_SECRET: 's'.repeat(20), IMAP_PASS: 'pw' });
    expect(s.webhooks[0]!.secrets).toEqual(['s'.repeat(20)]);
    expect(s.webhooks[0]).not.toHaveProperty('secretsEnv');
    expect(s.mailboxes[0]!.pass).toBe('pw');
    expect(s.mailboxes[0]).not.toHaveProperty('passwordEnv');
  });

  it('names the field of an unset variable or a missing value, never a secret', () => {
    expect(() => parseIntakeSources(doc, { IMAP_PASS: 'pw' })).toThrow(/webhooks\[0\]\.secretsEnv\[0\] names GH_SECRET, which is not set/);
    expect(() => parseIntakeSources({ mailboxes: [{ ...doc.mailboxes[0], host: '' }] }, { IMAP_PASS: 'pw' })).toThrow(/mailboxes\[0\]\.host is required/);
    expect(() => parseIntakeSources({ webhooks: [{ ...doc.webhooks[0], caseType: undefined }] }, {})).toThrow(/webhooks\[0\]\.caseType/);
  });
});

describe('cron', () => {
  const at = (iso: string) => new Date(iso);
  it('matches minutes, hours, steps, ranges and lists in UTC', () => {
    const c = parseCron('*/15 9-17 * * 1-5');
    expect(c.matches(at('2026-11-30T09:45:00Z'))).toBe(true); // Monday
    expect(c.matches(at('2026-11-30T09:46:00Z'))).toBe(false);
    expect(c.matches(at('2026-11-29T09:45:00Z'))).toBe(false); // Sunday
    expect(parseCron('0 6 * * 7').matches(at('2026-11-29T06:00:00Z'))).toBe(true); // 7 = Sunday
    // Both day fields restricted: either one matches (Vixie cron).
    const either = parseCron('0 0 1 * 1');
    expect(either.matches(at('2026-12-01T00:00:00Z'))).toBe(true); // the 1st, a Tuesday
    expect(either.matches(at('2026-11-30T00:00:00Z'))).toBe(true); // a Monday
    expect(either.matches(at('2026-12-02T00:00:00Z'))).toBe(false);
  });

  it('lists the slots in a half-open window (after, through]', () => {
    const slots = slotsBetween(parseCron('*/10 * * * *'), at('2026-11-29T10:00:00Z'), at('2026-11-29T10:30:00Z'));
    expect(slots.map((d) => d.toISOString())).toEqual(['2026-11-29T10:10:00.000Z', '2026-11-29T10:20:00.000Z', '2026-11-29T10:30:00.000Z']);
  });

  it('refuses malformed expressions naming the field', () => {
    expect(() => parseCron('* * * *', 'schedules[0].cron')).toThrow(/5 fields/);
    expect(() => parseCron('61 * * * *')).toThrow(/minute "61" is outside 0-59/);
    expect(() => parseCron('*/0 * * * *')).toThrow(/outside/);
    let caught: unknown;
    try {
      parseCron('x * * * *', 'schedules[2].cron');
    } catch (err) {
      caught = err;
    }
    expect((caught as { details?: unknown } | undefined)?.details).toEqual({ field: 'schedules[2].cron' });
  });
});
