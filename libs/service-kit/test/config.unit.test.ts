import { isEverdictError } from '@everdict/contracts';
import { describe, expect, it } from 'vitest';
import { ConfigError, envVar, integerParser, loadEnvConfig, parseBoolean, readEnv, urlParser } from '../src/index.js';

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error('expected a ConfigError');
}

describe('loadEnvConfig', () => {
  it('applies defaults when nothing is set (embedded mode: no URLs required)', () => {
    expect(loadEnvConfig({})).toEqual({ port: 8080, logLevel: 'info' });
  });

  it('reads every variable', () => {
    const cfg = loadEnvConfig(
      {
        DATABASE_URL: 'postgresql://app:pw@db:5432/everdict',
        AMQP_URL: 'amqps://guest:guest@mq:5671',
        EVERDICT_CONFIG: '/etc/everdict/fleet.yaml',
        PORT: '9100',
        LOG_LEVEL: 'DEBUG',
      },
      { serviceName: 'gate' },
    );
    expect(cfg).toEqual({
      databaseUrl: 'postgresql://app:pw@db:5432/everdict',
      amqpUrl: 'amqps://guest:guest@mq:5671',
      configPath: '/etc/everdict/fleet.yaml',
      port: 9100,
      logLevel: 'debug',
      serviceName: 'gate',
    });
  });

  it('treats empty and blank variables as unset', () => {
    expect(loadEnvConfig({ PORT: '', LOG_LEVEL: '  ', DATABASE_URL: '' })).toEqual({ port: 8080, logLevel: 'info' });
  });

  it('names every offending variable at once, with the reason, in message and details.fields', () => {
    const err = configError(() =>
      loadEnvConfig({ PORT: 'abc', LOG_LEVEL: 'verbose', DATABASE_URL: 'mysql://root:hunter2@db/x', AMQP_URL: 'http://mq' }),
    );
    expect(isEverdictError(err, 'config_invalid')).toBe(true);
    expect(err.fields.map((f) => f.name)).toEqual(['DATABASE_URL', 'AMQP_URL', 'PORT', 'LOG_LEVEL']);
    expect(err.message).toContain('PORT: must be an integer 0-65535 (0 picks a free port), got "abc"');
    expect(err.message).toContain('LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, got "verbose"');
    expect(err.message).toContain('DATABASE_URL: must be a postgres:// or postgresql:// URL, got scheme "mysql:"');
    expect(err.message).toContain('AMQP_URL: must be an amqp:// or amqps:// URL, got scheme "http:"');
    expect(err.message).toMatch(/^invalid configuration \(4 problems\)/);
    expect(err.details.fields).toEqual(err.fields.map((f) => ({ name: f.name, reason: f.reason })));
  });

  it('rejects out-of-range and non-integer ports', () => {
    for (const bad of ['65536', '-1', '80.5', '1e3', '0x50']) {
      const err = configError(() => loadEnvConfig({ PORT: bad }));
      expect(err.fields).toEqual([{ name: 'PORT', reason: `must be an integer 0-65535 (0 picks a free port), got ${JSON.stringify(bad)}` }]);
    }
  });

  it('never shows a URL password, whether the URL has a wrong scheme or does not parse', () => {
    const err = configError(() =>
      loadEnvConfig({ DATABASE_URL: 'mysql://root:s3cr3t-pw@db/x', AMQP_URL: 'amqp//guest:an0ther-pw@mq' }),
    );
    const everything = JSON.stringify({ message: err.message, details: err.details, fields: err.fields, stack: err.stack });
    expect(everything).not.toContain('s3cr3t-pw');
    expect(everything).not.toContain('an0ther-pw');
    expect(err.fields.find((f) => f.name === 'AMQP_URL')?.reason).toContain('not shown');
  });

  it('validates extra variables in the same error as the base ones', () => {
    const extra = {
      batchSize: envVar('RELAY_BATCH_SIZE', integerParser(1, 10_000), { default: 500 }),
      token: envVar('INTAKE_TOKEN', (raw) => raw, { required: true }),
      shadow: envVar('SHADOW', parseBoolean),
    };
    const ok = loadEnvConfig({ INTAKE_TOKEN: 't' }, { extra });
    expect(ok).toEqual({ port: 8080, logLevel: 'info', batchSize: 500, token: 't', shadow: undefined });
    const n: number = ok.batchSize;
    expect(n).toBe(500);

    const err = configError(() => loadEnvConfig({ PORT: 'x', RELAY_BATCH_SIZE: '0', SHADOW: 'maybe' }, { extra }));
    expect(err.fields).toEqual([
      { name: 'PORT', reason: 'must be an integer 0-65535 (0 picks a free port), got "x"' },
      { name: 'RELAY_BATCH_SIZE', reason: 'must be an integer 1-10000, got "0"' },
      { name: 'INTAKE_TOKEN', reason: 'is required but not set' },
      { name: 'SHADOW', reason: 'must be true/false (or 1/0, yes/no, on/off), got "maybe"' },
    ]);
  });

  it('refuses an extra variable that shadows a base one', () => {
    expect(() => loadEnvConfig({}, { extra: { p: envVar('PORT', (r) => r) } })).toThrow(/collides/);
  });
});

describe('readEnv', () => {
  it('returns typed values and reports a custom parser message verbatim', () => {
    const spec = { url: envVar('UPSTREAM_URL', urlParser(['https:'])), when: envVar('WHEN', (raw) => {
      if (raw !== 'now') throw new Error('must be "now"');
      return raw;
    }) };
    expect(readEnv(spec, { UPSTREAM_URL: 'https://x.example' })).toEqual({ url: 'https://x.example', when: undefined });
    const err = configError(() => readEnv(spec, { UPSTREAM_URL: 'http://u:pw@x', WHEN: 'later' }));
    expect(err.message).toBe(
      'invalid configuration (2 problems): UPSTREAM_URL: must be a https:// URL, got scheme "http:"; WHEN: must be "now"',
    );
  });
});
