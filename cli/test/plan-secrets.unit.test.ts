import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '@everdict/service-kit';
import { planNode } from '../src/node/plan.js';

const SAMPLE_CONFIG = fileURLToPath(new URL('../../infra/config/fleet.json', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'everdict-plan-secrets-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, content: string): string {
  const p = join(dir, name);
  writeFileSync(p, content);
  return p;
}

describe('planNode: secrets from X_FILE, TLS settings', () => {
  it('reads DATABASE_URL and a variable a connector names from files; the composition root gets what was read', async () => {
    const env = {
      DATABASE_URL_FILE: file('db', 'postgres://app:pw@127.0.0.1:5432/x\n'),
      AMQP_URL: 'amqp://guest:guest@127.0.0.1:5672',
      EVERDICT_CONFIG: SAMPLE_CONFIG,
      EVERDICT_DEMO_NOTES_URL_FILE: file('notes', 'http://127.0.0.1:9/demo/notes'),
      PGSSLMODE: 'no-verify',
    };
    const plan = await planNode(['execution-coordinator'], env);
    try {
      expect(plan.mode).toBe('fleet');
      expect(plan.values.databaseUrl).toBe('postgres://app:pw@127.0.0.1:5432/x?sslmode=no-verify');
      expect(plan.secretsFromFiles).toEqual({ DATABASE_URL: 'postgres://app:pw@127.0.0.1:5432/x', EVERDICT_DEMO_NOTES_URL: 'http://127.0.0.1:9/demo/notes' });
      expect(plan.connectors?.names()).toContain('notes');
      expect(plan.amqpTls).toBeUndefined();
    } finally {
      await plan.connectors?.close();
    }
  });

  it('reports secret-file and TLS problems with every other one, naming the variables', async () => {
    const err = await planNode(['execution-coordinator'], {
      DATABASE_URL: 'postgres://u:hunter2@h/x',
      DATABASE_URL_FILE: file('db2', 'postgres://u:other@h/x'),
      AMQP_URL: 'amqp://guest:guest@127.0.0.1:5672',
      AMQP_TLS_CA_PATH: join(dir, 'no-ca.pem'),
      EVERDICT_CONFIG: SAMPLE_CONFIG,
      EVERDICT_DEMO_NOTES_URL_FILE: join(dir, 'absent'),
    }).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    const names = (err as ConfigError).fields.map((f) => f.name);
    expect(names).toEqual(expect.arrayContaining(['DATABASE_URL, DATABASE_URL_FILE', 'AMQP_URL', 'AMQP_TLS_CA_PATH', 'EVERDICT_DEMO_NOTES_URL_FILE']));
    expect((err as Error).message).not.toMatch(/hunter2|other/);
  });
});
