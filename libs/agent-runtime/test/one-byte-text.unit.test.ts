/**
 * The kernel's own tool descriptions reach every model request, and with it every request
 * paper, its hash and the state that carries its messages. V8 keeps a string one byte per
 * character only while every character is ≤ U+00FF: one character above it (an ellipsis, a
 * typographic quote) made each request string two-byte — twice the bytes to flatten, hash and
 * encode on every turn (profiled: ~5% of a turn-worker's CPU at peak). Operators' prompts may
 * need any character; the built-in text does not.
 */
import { describe, expect, it } from 'vitest';
import { INTRINSIC_DESCRIPTORS } from '../src/intrinsic-descriptors.js';

const aboveLatin1 = (text: string): string[] => [...new Set([...text].filter((c) => c.codePointAt(0)! > 0xff))];

describe('built-in model-facing text', () => {
  it('the intrinsic tool descriptors are Latin-1', () => {
    for (const [name, d] of Object.entries(INTRINSIC_DESCRIPTORS)) expect(aboveLatin1(JSON.stringify(d)), name).toEqual([]);
  });

  it('the check finds a character above U+00FF', () => {
    expect(aboveLatin1('result:… “quoted” café')).toEqual(['…', '“', '”']);
  });
});
