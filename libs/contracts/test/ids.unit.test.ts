import { describe, expect, it } from 'vitest';
import { validate, version } from 'uuid';
import { isUuid, newId } from '../src/ids.js';

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('newId (UUIDv7)', () => {
  it('is a valid version 7, variant 0b10 UUID', () => {
    for (let i = 0; i < 2000; i++) {
      const id = newId();
      expect(id).toMatch(V7);
      expect(validate(id)).toBe(true);
      expect(version(id)).toBe(7);
      expect(isUuid(id)).toBe(true);
    }
  });

  it('carries the allocation time in its first 48 bits', () => {
    const before = Date.now();
    const id = newId();
    const after = Date.now();
    const ms = parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
    expect(ms).toBeGreaterThanOrEqual(before);
    // The millisecond moves past the clock only when a millisecond's counter runs out.
    expect(ms).toBeLessThanOrEqual(after + 1);
  });

  it('sorts in allocation order and never repeats, within one millisecond and across many', () => {
    const ids = Array.from({ length: 50_000 }, () => newId());
    const outOfOrder = ids.filter((id, i) => i > 0 && !(id > ids[i - 1]!));
    expect(outOfOrder).toEqual([]);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('ends in random bits: no two of a thousand ids share their last ten hex digits', () => {
    const tails = new Set(Array.from({ length: 1000 }, () => newId().slice(-10)));
    expect(tails.size).toBe(1000);
  });
});
