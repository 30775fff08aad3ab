import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveSecretFiles, secretFromEnv } from '../src/secretFiles.js';
import type { ConfigProblem } from '../src/config.js';

const dir = mkdtempSync(join(tmpdir(), 'everdict-secret-files-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, content: string): string {
  const path = join(dir, name);
  writeFileSync(path, content);
  return path;
}

const SECRET = 'postgres://app:s3cr3t-value@db:5432/everdict';

describe('secrets from files (X_FILE)', () => {
  it('reads the trimmed content of X_FILE as X', () => {
    const path = file('db-url', `  ${SECRET}\n\n`);
    expect(secretFromEnv({ DATABASE_URL_FILE: path }, 'DATABASE_URL')).toEqual({ value: SECRET });
    const problems: ConfigProblem[] = [];
    const fromFiles: Record<string, string> = {};
    const env = resolveSecretFiles({ DATABASE_URL_FILE: path, PORT: '1' }, ['DATABASE_URL', 'AMQP_URL'], problems, { fromFiles });
    expect(problems).toEqual([]);
    expect(env).toMatchObject({ DATABASE_URL: SECRET, PORT: '1' });
    expect(fromFiles).toEqual({ DATABASE_URL: SECRET });
  });

  it('X alone is used as it is; neither set stays unset', () => {
    expect(secretFromEnv({ AMQP_URL: 'amqp://x' }, 'AMQP_URL')).toEqual({ value: 'amqp://x' });
    expect(secretFromEnv({ AMQP_URL_FILE: '  ' }, 'AMQP_URL')).toEqual({});
  });

  it('X and X_FILE both set: a problem naming both, never either value', () => {
    const path = file('both', 'from-the-file');
    const problems: ConfigProblem[] = [];
    const env = resolveSecretFiles({ OPENAI_KEY: 'sk-direct-value', OPENAI_KEY_FILE: path }, ['OPENAI_KEY'], problems);
    expect(problems).toHaveLength(1);
    expect(problems[0]!.name).toBe('OPENAI_KEY, OPENAI_KEY_FILE');
    expect(problems[0]!.reason).toMatch(/both are set/);
    expect(JSON.stringify(problems)).not.toMatch(/sk-direct-value|from-the-file/);
    expect(env['OPENAI_KEY']).toBe('sk-direct-value');
  });

  it('an unreadable or missing file: a problem naming X_FILE and the path, never the content', () => {
    const missing = join(dir, 'nope');
    expect(secretFromEnv({ AMQP_URL_FILE: missing }, 'AMQP_URL').problem).toEqual({ name: 'AMQP_URL_FILE', reason: `names ${JSON.stringify(missing)}, which cannot be read (ENOENT)` });
    const locked = file('locked', SECRET);
    chmodSync(locked, 0o000);
    // root reads any file; the injected reader stands for the kernel refusing it.
    const problem = secretFromEnv({ DATABASE_URL_FILE: locked }, 'DATABASE_URL', () => {
      throw Object.assign(new Error(`EACCES: permission denied, open '${locked}'`), { code: 'EACCES' });
    }).problem;
    expect(problem?.name).toBe('DATABASE_URL_FILE');
    expect(problem?.reason).toContain('(EACCES)');
    expect(JSON.stringify(problem)).not.toContain('s3cr3t');
  });

  it('an empty file is a problem, not an empty secret', () => {
    const empty = file('empty', ' \n');
    expect(secretFromEnv({ GH_SECRET_FILE: empty }, 'GH_SECRET').problem?.reason).toMatch(/is empty$/);
  });

  it('only declared names are resolved: an unrelated *_FILE is never read', () => {
    const problems: ConfigProblem[] = [];
    const env = resolveSecretFiles({ RABBITMQ_CONFIG_FILE: join(dir, 'absent') }, ['DATABASE_URL'], problems);
    expect(problems).toEqual([]);
    expect(env['RABBITMQ_CONFIG']).toBeUndefined();
  });
});
