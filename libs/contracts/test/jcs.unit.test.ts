import canonicalize from 'canonicalize';
import { describe, expect, it } from 'vitest';
import { inCanonicalOrder, jcs } from '../src/jcs.js';

/** A deterministic generator (mulberry32), so a failure names a reproducible seed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ALPHABET = ['a', 'b', 'Z', '0', '1', ' ', '"', '\\', '/', '\n', '\t', '\u0000', '\u001f', '\u007f', 'ü', '€', '\ufb33', '\ud83d\ude00', '\u2028', 'key', '_', '-'];

/** `sorted`: every object's keys inserted in canonical order (the documents jcs writes with JSON.stringify). */
function value(r: () => number, depth: number, sorted = false): unknown {
  const pick = r();
  const str = () => Array.from({ length: Math.floor(r() * 6) }, () => ALPHABET[Math.floor(r() * ALPHABET.length)]).join('');
  if (depth <= 0 || pick < 0.35) {
    const k = Math.floor(r() * 9);
    switch (k) {
      case 0:
        return null;
      case 1:
        return r() < 0.5;
      case 2:
        return Math.floor((r() - 0.5) * 1e6);
      case 3:
        return (r() - 0.5) * 10 ** Math.floor((r() - 0.5) * 60);
      case 4:
        return [0, -0, 1e21, 1e-7, 4.5, 2e-3, 9007199254740992, Number('333333333.33333329')][Math.floor(r() * 8)];
      default:
        return str();
    }
  }
  if (pick < 0.6) return Array.from({ length: Math.floor(r() * 5) }, () => (r() < 0.05 ? undefined : value(r, depth - 1, sorted)));
  const entries: [string, unknown][] = [];
  const n = Math.floor(r() * 6);
  for (let i = 0; i < n; i++) entries.push([str(), r() < 0.05 ? undefined : value(r, depth - 1, sorted)]);
  if (r() < 0.1) entries.push(['when', new Date(Math.floor(r() * 2e12))]);
  if (sorted) entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const o: Record<string, unknown> = {};
  for (const [k, v] of entries) o[k] = v;
  return o;
}

describe('jcs (the canonicalJson engine)', () => {
  it('writes exactly what the canonicalize package writes, on generated documents', () => {
    for (let seed = 1; seed <= 3000; seed++) {
      const doc = value(rng(seed), 5);
      expect(jcs(doc), `seed ${seed}`).toBe(canonicalize(doc));
    }
  });

  it('writes documents built in canonical key order (its JSON.stringify path) exactly as canonicalize does', () => {
    for (let seed = 1; seed <= 3000; seed++) {
      const doc = value(rng(seed), 5, true);
      expect(jcs(doc), `seed ${seed}`).toBe(canonicalize(doc));
    }
  });

  it('leaves to the member-by-member writer what JSON.stringify would write otherwise', () => {
    // Integer-like keys (enumerated in numeric order), boxed primitives, class instances, toJSON,
    // a null-prototype object, an array with a hole or an undefined element, -0 and exponents.
    class Point {
      constructor(
        readonly y: number,
        readonly x: number,
      ) {}
    }
    const bare = Object.assign(Object.create(null) as Record<string, unknown>, { a: 1, b: [2] });
    const withToJson = Object.assign([1, 2], { toJSON: () => 'replaced' });
    const docs: unknown[] = [
      { '10': 'a', '9': 'b', x: 1 },
      { a: new Number(3), b: new String('s'), c: new Boolean(false) },
      { p: new Point(1, 2) },
      { at: new Date(0), z: 1 },
      bare,
      { list: withToJson },
      { a: [1, 2], b: [undefined, null] },
      { a: -0, b: 1e21, c: 1e-7, d: 'line\nbreak "quoted" \u2028' },
    ];
    for (const doc of docs) expect(jcs(doc)).toBe(canonicalize(doc));
    // A hole is null, as JSON.stringify writes it (canonicalize writes nothing there).
    // eslint-disable-next-line no-sparse-arrays
    expect(jcs({ a: [1, , 3] })).toBe('{"a":[1,null,3]}');
  });

  it('agrees on documents whose keys are already in canonical order and on ones that are not', () => {
    const sorted = { a: 1, b: { c: [1, { d: null, e: 'x' }] }, z: true };
    const unsorted = { z: true, b: { c: [1, { e: 'x', d: null }] }, a: 1 };
    expect(jcs(sorted)).toBe(canonicalize(sorted));
    expect(jcs(unsorted)).toBe(canonicalize(unsorted));
    expect(jcs(unsorted)).toBe(jcs(sorted));
  });

  it('refuses what JSON cannot carry, and circular references', () => {
    const loop: Record<string, unknown> = { a: 1 };
    loop.self = { back: loop };
    expect(() => jcs(loop)).toThrow(/Circular/);
    expect(() => jcs({ s: 'x\udc00' })).toThrow(/surrogate/);
    expect(() => jcs({ a: ['ok', 'x\ud800'], b: 1 })).toThrow(/surrogate/);
    expect(() => jcs({ a: 1, b: Number.NaN })).toThrow(/NaN/);
    const deep: Record<string, unknown> = { a: 1 };
    let at = deep;
    for (let i = 0; i < 100; i++) at = (at.b = { a: i }) as Record<string, unknown>;
    at.b = deep;
    expect(() => jcs(deep)).toThrow(/Circular/);
    expect(() => jcs({ ['\ud800']: 1 })).toThrow(/surrogate/);
    expect(() => jcs([Number.NaN])).toThrow();
    expect(() => jcs({ n: Number.NEGATIVE_INFINITY })).toThrow();
    expect(() => jcs(10n)).toThrow();
    expect(jcs(undefined)).toBeUndefined();
  });

  it('shares an object that appears twice without calling it circular', () => {
    const shared = { x: 1 };
    expect(jcs({ a: shared, b: [shared, shared] })).toBe('{"a":{"x":1},"b":[{"x":1},{"x":1}]}');
  });

  it('inCanonicalOrder: the same document in JCS key order, written in one pass, byte for byte the same', () => {
    for (let seed = 1; seed <= 3000; seed++) {
      const doc = value(rng(seed), 5);
      const ordered = inCanonicalOrder(doc);
      expect(jcs(ordered), `seed ${seed}`).toBe(jcs(doc));
    }
    const unsorted = { z: true, b: { c: [1, { e: 'x', d: null }] }, a: 1 };
    const ordered = inCanonicalOrder(unsorted);
    expect(Object.keys(ordered)).toEqual(['a', 'b', 'z']);
    expect(JSON.stringify(ordered)).toBe(canonicalize(unsorted));
    // In order already: the very same object; a subtree in order is shared, not copied.
    const sorted = { a: 1, b: { c: 2 } };
    expect(inCanonicalOrder(sorted)).toBe(sorted);
    const mixed = { z: 1, a: sorted };
    expect(inCanonicalOrder(mixed).a).toBe(sorted);
    // What a plain object cannot hold in order is left as it is (jcs writes it member by member).
    const indexed = { '10': 'a', '9': 'b' };
    expect(inCanonicalOrder(indexed)).toBe(indexed);
    // A cycle is left for jcs to refuse, not followed for ever.
    const loop: Record<string, unknown> = { b: 1, a: 2 };
    loop.self = loop;
    expect(() => jcs(inCanonicalOrder(loop))).toThrow(/Circular/);
  });
});
