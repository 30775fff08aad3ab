import { describe, expect, it } from 'vitest';
import { sha256Hex } from '@everdict/contracts';
import {
  DEFAULT_BACKOFF,
  apiOriginKey,
  backoffCeiling,
  backoffDelay,
  escapeKeyPart,
  mailLocator,
  mailOriginKey,
  mailboxKey,
  normaliseMessageId,
  scheduleOriginKey,
  webhookOriginKey,
} from '@everdict/intake-sources';

const SHA = 'ab'.repeat(32);

describe('origin keys', () => {
  it('keys a mail by its Message-ID, scoped to account and mailbox, brackets stripped', () => {
    expect(mailOriginKey({ account: 'support@example.com', mailbox: 'INBOX', messageId: ' <CAF+1234@mail.example.com> ', sourceSha256: SHA })).toBe(
      'mail:support@example.com/INBOX:mid:CAF+1234@mail.example.com',
    );
  });

  it('is independent of UID and UIDVALIDITY, so a re-baseline re-scan finds the same key', () => {
    const a = mailOriginKey({ account: 'acct', mailbox: 'INBOX', messageId: '<m1@x>', sourceSha256: SHA });
    const b = mailOriginKey({ account: 'acct', mailbox: 'INBOX', messageId: 'm1@x', sourceSha256: 'cd'.repeat(32) });
    expect(a).toBe(b);
  });

  it('falls back to the sha-256 of the raw bytes when there is no Message-ID', () => {
    expect(mailOriginKey({ account: 'acct', mailbox: 'INBOX', messageId: undefined, sourceSha256: SHA })).toBe(`mail:acct/INBOX:sha256:${SHA}`);
    expect(mailOriginKey({ account: 'acct', mailbox: 'INBOX', messageId: '  <>  ', sourceSha256: SHA })).toBe(`mail:acct/INBOX:sha256:${SHA}`);
  });

  it('hashes over-long Message-IDs to bound the key length', () => {
    const long = `${'x'.repeat(300)}@example.com`;
    expect(mailOriginKey({ account: 'a', mailbox: 'INBOX', messageId: `<${long}>`, sourceSha256: SHA })).toBe(`mail:a/INBOX:mid-sha256:${sha256Hex(long)}`);
  });

  it('escapes separators in non-final components so two mailboxes never share a key', () => {
    expect(mailboxKey('a:b', 'c/d')).toBe('a%3Ab/c%2Fd');
    expect(mailboxKey('a', 'b/c')).not.toBe(mailboxKey('a/b', 'c'));
    expect(escapeKeyPart('Posteingang Ä')).toBe('Posteingang%20%C3%84');
    expect(mailOriginKey({ account: 'a', mailbox: 'INBOX', messageId: '<a b%@x>', sourceSha256: SHA })).toBe('mail:a/INBOX:mid:a%20b%25@x');
  });

  it('builds the UID locator, the webhook, api and schedule keys', () => {
    expect(mailLocator('acct', 'INBOX', 1795981791, 42)).toBe('mail:acct/INBOX:1795981791:42');
    expect(webhookOriginKey('github', '72d3162e-cc78-11e3-81ab-4c9367dc0958')).toBe('webhook:github:72d3162e-cc78-11e3-81ab-4c9367dc0958');
    expect(webhookOriginKey('desk', 'a:b/c')).toBe('webhook:desk:a:b/c');
    expect(apiOriginKey('ops:bot', 'k-1')).toBe('api:ops%3Abot:k-1');
    expect(scheduleOriginKey('nightly-audit', new Date('2026-03-01T02:00:00Z'))).toBe('schedule:nightly-audit:2026-03-01T02:00:00.000Z');
  });

  it('normalises Message-IDs', () => {
    expect(normaliseMessageId('<a@b>')).toBe('a@b');
    expect(normaliseMessageId('')).toBeUndefined();
    expect(normaliseMessageId(undefined)).toBeUndefined();
    expect(normaliseMessageId('Mixed@Case')).toBe('Mixed@Case');
  });
});

describe('reconnect backoff', () => {
  it('doubles from 1 s up to the 60 s cap', () => {
    const ceilings = Array.from({ length: 9 }, (_, n) => backoffCeiling(n));
    expect(ceilings).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000, 60_000]);
    expect(backoffCeiling(10_000)).toBe(60_000);
  });

  it('draws each delay from [ceiling/2, ceiling] with the injected randomness', () => {
    const schedule = (r: number) => [0, 1, 2, 3, 10].map((n) => backoffDelay(n, () => r));
    expect(schedule(0)).toEqual([500, 1_000, 2_000, 4_000, 30_000]);
    expect(schedule(0.5)).toEqual([750, 1_500, 3_000, 6_000, 45_000]);
    expect(schedule(0.999999)).toEqual([1_000, 2_000, 4_000, 8_000, 60_000]);
  });

  it('honours a custom policy', () => {
    const policy = { baseMs: 50, maxMs: 400, factor: 3 };
    expect([0, 1, 2, 3].map((n) => backoffCeiling(n, policy))).toEqual([50, 150, 400, 400]);
    expect(backoffDelay(1, () => 0.25, policy)).toBe(94);
  });

  it('refuses nonsense inputs', () => {
    expect(() => backoffCeiling(-1)).toThrow(RangeError);
    expect(() => backoffCeiling(1.5)).toThrow(RangeError);
    expect(() => backoffCeiling(0, { ...DEFAULT_BACKOFF, maxMs: 10 })).toThrow(RangeError);
    expect(() => backoffDelay(0, () => 1)).toThrow(RangeError);
  });
});
