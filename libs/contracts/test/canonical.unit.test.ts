import { describe, expect, it } from 'vitest';
import { canonicalJson, ownedUtf8, payloadHash, sha256Hex } from '@everdict/contracts';

describe('RFC 8785 canonical JSON', () => {
  it('sorts keys by UTF-16 code units, recursively (RFC 8785 §3.2.3)', () => {
    const input = {
      '\u20ac': 'Euro Sign',
      '\r': 'Carriage Return',
      '\ufb33': 'Hebrew Letter Dalet With Dagesh',
      '1': 'One',
      '\ud83d\ude00': 'Emoji: Grinning Face',
      '\u0080': 'Control',
      '\u00f6': 'Latin Small Letter O With Diaeresis',
    };
    expect(canonicalJson(input)).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
        '"\u20ac":"Euro Sign","\ud83d\ude00":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
    expect(canonicalJson({ b: { z: 1, a: [3, { y: 0, x: 0 }] }, a: null })).toBe('{"a":null,"b":{"a":[3,{"x":0,"y":0}],"z":1}}');
  });

  it.each([
    [1e21, '1e+21'],
    [1e20, '100000000000000000000'],
    [0.000001, '0.000001'],
    [1e-7, '1e-7'],
    [-0, '0'],
    [Number('333333333.33333329'), '333333333.3333333'],
    [1e30, '1e+30'],
    [4.5, '4.5'],
    [2e-3, '0.002'],
    [0.000000000000000000000000001, '1e-27'],
    [9007199254740992, '9007199254740992'],
  ])('formats the number %s as %s (ECMAScript shortest form)', (value, text) => {
    expect(canonicalJson(value)).toBe(text);
  });

  it('reproduces the RFC 8785 §3.2.2 example, including string escaping', () => {
    const input = JSON.parse(
      '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/", "literals": [null, true, false]}',
    ) as unknown;
    expect(canonicalJson(input)).toBe('{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}');
  });

  it('keeps non-ASCII characters literal and escapes only what JSON requires', () => {
    expect(canonicalJson({ s: 'ü€😀\u0007\t' })).toBe('{"s":"ü€😀\\u0007\\t"}');
  });

  it('refuses values JSON cannot carry', () => {
    expect(() => canonicalJson(Number.NaN)).toThrow();
    expect(() => canonicalJson(Number.POSITIVE_INFINITY)).toThrow();
    expect(() => canonicalJson('\ud800')).toThrow();
    expect(() => canonicalJson(undefined)).toThrow();
  });
});

describe('payloadHash', () => {
  it('is sha256 over the canonical UTF-8 bytes', () => {
    expect(payloadHash({})).toBe('sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a');
    expect(payloadHash({ b: 'ü', a: 1 })).toBe(`sha256:${sha256Hex(Buffer.from('{"a":1,"b":"ü"}', 'utf8'))}`);
  });

  it('does not depend on key order', () => {
    const a = { taskId: 'x', nested: { z: [1, 2], a: { q: true, p: null } }, n: 1.5 };
    const b = { n: 1.5, nested: { a: { p: null, q: true }, z: [1, 2] }, taskId: 'x' };
    expect(payloadHash(a)).toBe(payloadHash(b));
  });

  it('does depend on array order and on values', () => {
    expect(payloadHash({ a: [1, 2] })).not.toBe(payloadHash({ a: [2, 1] }));
    expect(payloadHash({ a: 1 })).not.toBe(payloadHash({ a: '1' }));
    expect(payloadHash({ a: 1 })).toMatch(/^sha256:[0-9a-f]{64}$/);
  });
});

describe('ownedUtf8', () => {
  it('holds exactly the UTF-8 bytes of the text in a buffer of its own, never a view of the shared pool', () => {
    for (const text of ['', 'a', '{"role":"tool","content":"é 🚀 \u0000"}', 'x'.repeat(40_000)]) {
      const b = ownedUtf8(text);
      expect(b.equals(Buffer.from(text, 'utf8'))).toBe(true);
      expect(b.byteOffset).toBe(0);
      expect(b.buffer.byteLength).toBe(b.byteLength);
    }
  });
});
