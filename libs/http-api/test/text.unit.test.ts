/** The pure validators behind every request body and query: bad text and bounded integers. */
import { describe, expect, it } from 'vitest';
import { RequestError, findBadText, integerParam, refuseBadQueryText, storableText, textProblem } from '../src/index.js';

const HIGH = '\ud83d';
const LOW = '\ude00';

describe('textProblem', () => {
  it.each([
    ['plain', undefined],
    ['emoji \ud83d\ude00 is a valid pair', undefined],
    ['a\u0000b', 'nul'],
    [`lone high ${HIGH}`, 'lone_surrogate'],
    [`lone low ${LOW} first`, 'lone_surrogate'],
    [`${LOW}${HIGH}`, 'lone_surrogate'], // reversed: neither half is paired
    [`pair then lone ${HIGH}${LOW}${HIGH}`, 'lone_surrogate'],
  ])('%j → %s', (s, problem) => {
    expect(textProblem(s)).toBe(problem);
  });
});

describe('findBadText', () => {
  it('names the field at any depth, keys included', () => {
    expect(findBadText({ title: 'ok', objective: 'x\u0000' })).toEqual({ field: 'objective', problem: 'nul' });
    expect(findBadText({ answers: [{ text: 'fine' }, { text: `x${HIGH}` }] })).toEqual({ field: 'answers.1.text', problem: 'lone_surrogate' });
    expect(findBadText({ meta: { ['k\u0000']: 1 } })).toEqual({ field: 'meta.(key)', problem: 'nul' });
    expect(findBadText('x\u0000')).toEqual({ field: 'body', problem: 'nul' });
    expect(findBadText({ n: 1, b: true, z: null, s: 'ok', a: ['ok'] })).toBeUndefined();
  });

  it('what JSON.parse makes of escapes is what is checked', () => {
    expect(findBadText(JSON.parse('{"title":"a\\u0000b"}'))).toEqual({ field: 'title', problem: 'nul' });
    expect(findBadText(JSON.parse('{"title":"a\\ud800b"}'))).toEqual({ field: 'title', problem: 'lone_surrogate' });
    expect(findBadText(JSON.parse('{"title":"a\\ud83d\\ude00b"}'))).toBeUndefined();
  });
});

describe('storableText', () => {
  it('replaces NULs and lone surrogates with U+FFFD and keeps valid pairs', () => {
    expect(storableText(`a\u0000b${HIGH}c\ud83d\ude00${LOW}`)).toBe('a\ufffdb\ufffdc\ud83d\ude00\ufffd');
    expect(textProblem(storableText(`\u0000${HIGH}${LOW}${LOW}`))).toBeUndefined();
  });
});

describe('integerParam', () => {
  const p = (q: string) => new URLSearchParams(q);
  const refused = (q: string, name: string, spec: Parameters<typeof integerParam>[2]) => {
    try {
      integerParam(p(q), name, spec);
    } catch (err) {
      return err instanceof RequestError ? { status: err.status, error: err.error, field: err.field } : err;
    }
    return 'accepted';
  };

  it('reads in-range decimal integers and the default', () => {
    expect(integerParam(p('after=42'), 'after', { min: 0 })).toBe(42);
    expect(integerParam(p(''), 'after', { min: 0, default: 0 })).toBe(0);
    expect(integerParam(p(`after=${Number.MAX_SAFE_INTEGER}`), 'after', { min: 0 })).toBe(Number.MAX_SAFE_INTEGER);
  });

  it.each(['after=99999999999999999999', 'after=-1', 'after=1e3', 'after=1.5', 'after=', 'after=0x10', 'after=%2012', `after=${Number.MAX_SAFE_INTEGER + 1}`])('%s → 400 naming after', (q) => {
    expect(refused(q, 'after', { min: 0 })).toEqual({ status: 400, error: 'invalid_query', field: 'after' });
  });

  it('refuses beyond max and a missing required parameter', () => {
    expect(refused('limit=1001', 'limit', { min: 1, max: 1000 })).toEqual({ status: 400, error: 'invalid_query', field: 'limit' });
    expect(refused('', 'limit', { min: 1, max: 1000 })).toEqual({ status: 400, error: 'invalid_query', field: 'limit' });
  });
});

describe('refuseBadQueryText', () => {
  it('names the parameter whose value holds a NUL or a lone surrogate', () => {
    expect(() => refuseBadQueryText(new URLSearchParams('state=open&x=ok'))).not.toThrow();
    expect(() => refuseBadQueryText(new URLSearchParams('state=%00'))).toThrow(expect.objectContaining({ status: 400, error: 'invalid_text', field: 'state' }));
  });
});
