/**
 * The outbox NOTIFY payload: the message ids a commit wrote, so a relay of another process
 * claims them by key. Anything else in a payload — empty, too long to send, not uuids — means
 * "rows of unknown ids may be waiting" and the relay claims everything claimable.
 */
import { describe, expect, it } from 'vitest';
import { newId } from '@everdict/contracts';
import { outboxIdsOf, outboxNotifyPayload } from '../src/sql/outbox.js';

describe('outbox NOTIFY payload', () => {
  it('names the ids and reads them back', () => {
    const ids = [newId(), newId(), newId()];
    expect(outboxIdsOf(outboxNotifyPayload(ids))).toEqual(ids);
    expect(outboxIdsOf(outboxNotifyPayload([ids[0]!]))).toEqual([ids[0]]);
  });

  it('sends no ids when they would not fit in a NOTIFY (under 8,000 bytes)', () => {
    const fits = Array.from({ length: 200 }, () => newId());
    expect(outboxNotifyPayload(fits).length).toBeLessThan(8_000);
    expect(outboxIdsOf(outboxNotifyPayload(fits))).toEqual(fits);
    const many = Array.from({ length: 300 }, () => newId());
    expect(outboxNotifyPayload(many)).toBe('');
    expect(outboxIdsOf(outboxNotifyPayload(many))).toBeUndefined();
  });

  it('reads anything but a list of uuids as no ids', () => {
    const id = newId();
    for (const payload of ['', 'x', `${id},`, `,${id}`, `${id},not-a-uuid`, `${id};${id}`, `${id}\u0000`, `'${id}'`]) {
      expect(outboxIdsOf(payload), JSON.stringify(payload)).toBeUndefined();
    }
    expect(outboxIdsOf(id.toUpperCase())).toEqual([id.toUpperCase()]);
  });
});
