import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { amqpTlsOptions, pgUrlWithTls } from '../src/tls.js';
import type { ConfigProblem } from '../src/config.js';

const dir = mkdtempSync(join(tmpdir(), 'everdict-tls-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const CA = join(dir, 'ca.pem');
writeFileSync(CA, '-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n');
const CERT = join(dir, 'client.pem');
writeFileSync(CERT, 'CERT');
const KEY = join(dir, 'client.key');
writeFileSync(KEY, 'KEY');
const URL_ = 'postgres://app:pw-not-shown@db:5432/everdict';

describe('Postgres TLS from the environment', () => {
  it('leaves a URL alone when nothing asks for TLS', () => {
    const problems: ConfigProblem[] = [];
    expect(pgUrlWithTls(URL_, {}, problems)).toBe(URL_);
    expect(problems).toEqual([]);
  });

  it('PGSSLMODE and PGSSLROOTCERT fill in what the URL leaves out; the URL wins', () => {
    const problems: ConfigProblem[] = [];
    const out = new URL(pgUrlWithTls(URL_, { PGSSLMODE: 'verify-full', PGSSLROOTCERT: CA }, problems));
    expect(problems).toEqual([]);
    expect(out.searchParams.get('sslmode')).toBe('verify-full');
    expect(out.searchParams.get('sslrootcert')).toBe(CA);
    expect(out.password).toBe('pw-not-shown');
    const own = new URL(pgUrlWithTls(`${URL_}?sslmode=require`, { PGSSLMODE: 'disable' }, problems));
    expect(own.searchParams.get('sslmode')).toBe('require');
  });

  it('an unknown sslmode or an unreadable CA is a problem naming its variable, never the URL', () => {
    const problems: ConfigProblem[] = [];
    pgUrlWithTls(`${URL_}?sslmode=sometimes`, {}, problems);
    pgUrlWithTls(URL_, { PGSSLMODE: 'strict' }, problems);
    pgUrlWithTls(URL_, { PGSSLROOTCERT: join(dir, 'missing.pem') }, problems);
    pgUrlWithTls(`${URL_}?sslmode=verify-ca&sslrootcert=${encodeURIComponent(join(dir, 'gone.pem'))}`, {}, problems);
    expect(problems.map((p) => p.name)).toEqual(['DATABASE_URL', 'PGSSLMODE', 'PGSSLROOTCERT', 'DATABASE_URL (sslrootcert)']);
    expect(problems[0]!.reason).toBe('sslmode must be one of disable, prefer, require, verify-ca, verify-full, no-verify, got "sometimes"');
    expect(problems[2]!.reason).toContain('cannot be read (ENOENT)');
    expect(JSON.stringify(problems)).not.toContain('pw-not-shown');
  });
});

describe('RabbitMQ TLS from the environment', () => {
  it('no TLS variables: no socket options', () => {
    expect(amqpTlsOptions('amqps://u:p@mq:5671', {}, [])).toBeUndefined();
  });

  it('reads the CA bundle and the client certificate for an amqps:// URL', () => {
    const problems: ConfigProblem[] = [];
    const tls = amqpTlsOptions('amqps://u:p@mq:5671', { AMQP_TLS_CA_PATH: CA, AMQP_TLS_CERT_PATH: CERT, AMQP_TLS_KEY_PATH: KEY }, problems);
    expect(problems).toEqual([]);
    expect(tls?.ca?.[0]?.toString()).toContain('BEGIN CERTIFICATE');
    expect(tls?.cert?.toString()).toBe('CERT');
    expect(tls?.key?.toString()).toBe('KEY');
  });

  it('TLS files with a plain amqp:// URL, half a client certificate, an unreadable file: each a problem', () => {
    const problems: ConfigProblem[] = [];
    amqpTlsOptions('amqps://mq-1:5671,amqp://u:secret@mq-2:5672', { AMQP_TLS_CA_PATH: CA }, problems);
    amqpTlsOptions('amqps://mq:5671', { AMQP_TLS_CERT_PATH: CERT }, problems);
    amqpTlsOptions('amqps://mq:5671', { AMQP_TLS_CA_PATH: join(dir, 'nope.pem') }, problems);
    expect(problems.map((p) => p.name)).toEqual(['AMQP_URL', 'AMQP_TLS_KEY_PATH', 'AMQP_TLS_CA_PATH']);
    expect(problems[0]!.reason).toMatch(/^must use amqps:\/\/ when AMQP_TLS_CA_PATH is set/);
    expect(JSON.stringify(problems)).not.toContain('secret');
  });
});
