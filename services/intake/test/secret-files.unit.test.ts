import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseIntakeSources } from '../src/index.js';

const dir = mkdtempSync(join(tmpdir(), 'everdict-intake-secrets-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('intake sources: secrets named by variable may come from X_FILE', () => {
  const doc = {
    webhooks: [{ name: 'gh', caseType: 'support', secretsEnv: ['GH_SECRET'], signature: { kind: 'github' }, mapping: { kind: 'github-issues' } }],
    mailboxes: [{ account: 'a@example.com', host: 'imap', port: 993, user: 'a', passwordEnv: 'IMAP_PASS', caseType: 'support' }],
  };

  it('reads a webhook secret and a mailbox password from their files', () => {
    const gh = join(dir, 'gh');
    writeFileSync(gh, `${'w'.repeat(24)}\n`);
    const pass = join(dir, 'imap');
    writeFileSync(pass, 'imap-pw');
    const s = parseIntakeSources(doc, { GH_SECRET_FILE: gh, IMAP_PASS_FILE: pass });
    expect(s.webhooks[0]!.secrets).toEqual(['w'.repeat(24)]);
    expect(s.mailboxes[0]!.pass).toBe('imap-pw');
  });

  it('both forms set, or an unreadable file: an error naming the field and the variables, never the value', () => {
    const gh = join(dir, 'gh2');
    writeFileSync(gh, 'from-file-secret');
    const both = () => parseIntakeSources(doc, { GH_SECRET: 'direct-secret-value', GH_SECRET_FILE: gh, IMAP_PASS: 'pw' });
    expect(both).toThrow(/webhooks\[0\]\.secretsEnv\[0\] names GH_SECRET: GH_SECRET, GH_SECRET_FILE both are set/);
    expect(() => parseIntakeSources(doc, { GH_SECRET: 's'.repeat(20), IMAP_PASS_FILE: join(dir, 'absent') })).toThrow(/mailboxes\[0\]\.passwordEnv names IMAP_PASS: IMAP_PASS_FILE names ".*absent", which cannot be read \(ENOENT\)/);
    try {
      both();
    } catch (err) {
      expect((err as Error).message).not.toMatch(/direct-secret-value|from-file-secret/);
    }
  });
});
