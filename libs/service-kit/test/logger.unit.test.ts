import { EverdictError } from '@everdict/contracts';
import { describe, expect, it } from 'vitest';
import { createLogger, redactUrlCredentials, scrubSecrets } from '../src/index.js';

/** A pino destination that keeps every line, so tests read exactly what would be shipped. */
function capture() {
  const lines: string[] = [];
  return {
    lines,
    destination: { write: (s: string) => void lines.push(s) },
    records: () => lines.map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

const SECRET = 'pw-7f3a9c';

describe('createLogger', () => {
  it('writes JSON lines with the service, ISO time, level and message', () => {
    const out = capture();
    const log = createLogger({ service: 'gate', level: 'info', destination: out.destination });
    log.info({ caseId: 'c-1', ms: 12 }, 'gate decided');
    log.debug('below the level');
    const [rec, ...rest] = out.records();
    expect(rest).toEqual([]);
    expect(rec).toMatchObject({ service: 'gate', level: 30, caseId: 'c-1', ms: 12, msg: 'gate decided' });
    expect(String(rec?.time)).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('never writes a secret, wherever it sits in the logged object', () => {
    const out = capture();
    const log = createLogger({ service: 'intake', destination: out.destination });
    log.info(
      {
        password: SECRET,
        token: SECRET,
        authorization: `Bearer ${SECRET}`,
        apiKey: SECRET,
        secret: SECRET,
        cookie: `sid=${SECRET}`,
        databaseUrl: `postgres://app:${SECRET}@db/x`,
        amqpUrl: `amqp://guest:${SECRET}@mq`,
        user: { password: SECRET, name: 'ada' },
        headers: { authorization: `Bearer ${SECRET}`, 'set-cookie': SECRET, accept: 'json' },
        req: { headers: { authorization: `Bearer ${SECRET}`, 'x-api-key': SECRET } },
        deep: { a: { b: { client_secret: SECRET, refreshToken: SECRET } } },
        list: [{ access_token: SECRET }],
        target: `connecting to postgresql://app:${SECRET}@db:5432/everdict`,
      },
      `connect failed for amqp://guest:${SECRET}@mq:5672`,
    );
    const text = out.lines.join('');
    expect(text).not.toContain(SECRET);
    const [rec] = out.records();
    expect(rec).toMatchObject({ user: { name: 'ada', password: '[Redacted]' }, headers: { accept: 'json' } });
    expect(rec?.target).toBe('connecting to postgresql://app:[Redacted]@db:5432/everdict');
    expect(rec?.msg).toBe('connect failed for amqp://guest:[Redacted]@mq:5672');
  });

  it('omits prompt and content fields instead of logging them', () => {
    const out = capture();
    const log = createLogger({ service: 'turn-worker', destination: out.destination });
    log.info({ taskId: 't-1', prompt: 'SYSTEM: you are…', messages: [{ role: 'user', content: 'customer text' }], payload: { note: 'body' } }, 'turn');
    const text = out.lines.join('');
    expect(text).not.toContain('you are');
    expect(text).not.toContain('customer text');
    expect(text).not.toContain('"note"');
    expect(out.records()[0]).toMatchObject({ taskId: 't-1', prompt: '[Omitted]', payload: '[Omitted]' });
  });

  it('scrubs URL passwords from errors: message, stack and details', () => {
    const out = capture();
    const log = createLogger({ service: 'relay', destination: out.destination });
    const err = new EverdictError('broker_unreachable', `cannot reach amqp://guest:${SECRET}@mq`, { details: { url: `amqp://guest:${SECRET}@mq`, password: SECRET } });
    log.error({ err }, 'relay stopped');
    log.error(err);
    log.child({ databaseUrl: `postgres://u:${SECRET}@h/d` }).warn('child');
    const text = out.lines.join('');
    expect(text).not.toContain(SECRET);
    const [first, second, third] = out.records();
    expect(first?.err).toMatchObject({ type: 'EverdictError', code: 'broker_unreachable', message: 'cannot reach amqp://guest:[Redacted]@mq' });
    expect(second?.msg).toBe('cannot reach amqp://guest:[Redacted]@mq');
    expect(third?.databaseUrl).toBe('[Redacted]');
  });
});

describe('secret helpers', () => {
  it('redactUrlCredentials keeps user, host and path, drops only the password', () => {
    expect(redactUrlCredentials('postgres://app:p%40ss@db:5432/x?sslmode=require')).toBe('postgres://app:[Redacted]@db:5432/x?sslmode=require');
    expect(redactUrlCredentials('amqp://guest:gu@st@mq/vhost')).toBe('amqp://guest:[Redacted]@mq/vhost');
    expect(redactUrlCredentials('http://host:8080/path a@b')).toBe('http://host:8080/path a@b');
    expect(redactUrlCredentials('postgres://app@db/x')).toBe('postgres://app@db/x');
  });

  it('scrubSecrets does not mutate its input', () => {
    const input = { password: 'x', nested: { token: 'y' } };
    scrubSecrets(input);
    expect(input).toEqual({ password: 'x', nested: { token: 'y' } });
  });
});
