/** translateDbError for the faults of issue 12: lost connections are retryable, bad text is typed. */
import { describe, expect, it } from 'vitest';
import { translateDbError } from '../src/index.js';

describe('translateDbError: connection faults and bad text', () => {
  it.each([
    [Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5999'), { code: 'ECONNREFUSED' })],
    [Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' })],
    [Object.assign(new Error('the database system is shutting down'), { code: '57P03' })],
    [new Error('Connection terminated unexpectedly')],
    [new Error('Client has encountered a connection error and is not queryable')],
    [Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' })],
  ])('%s → database_unavailable, retryable', (err) => {
    expect(translateDbError(err)).toMatchObject({ code: 'database_unavailable', retryable: true });
  });

  it.each([
    [Object.assign(new Error('invalid byte sequence for encoding "UTF8": 0x00'), { code: '22021' })],
    [Object.assign(new Error('unsupported Unicode escape sequence'), { code: '22P05' })],
    [Object.assign(new Error('invalid input syntax for type json'), { code: '22P02' })],
  ])('%s → invalid_text, not retryable', (err) => {
    expect(translateDbError(err)).toMatchObject({ code: 'invalid_text', retryable: false });
  });

  it('leaves other invalid input (22P02 of a uuid) and unknown errors alone', () => {
    const uuid = Object.assign(new Error('invalid input syntax for type uuid: "x"'), { code: '22P02' });
    expect(translateDbError(uuid)).toBe(uuid);
    const other = Object.assign(new Error('boom'), { code: 'EWHATEVER' });
    expect(translateDbError(other)).toBe(other);
  });
});
