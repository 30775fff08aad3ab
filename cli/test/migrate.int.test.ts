import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { freshDatabase } from '@everdict/testkit';

const run = promisify(execFile);
const main = fileURLToPath(new URL('../src/main.ts', import.meta.url));

async function everdict(args: string[], env: Record<string, string | undefined>) {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--conditions=source', '--import', 'tsx', main, ...args], {
      env: { ...process.env, DATABASE_URL: undefined, ...env } as NodeJS.ProcessEnv,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('everdict migrate', () => {
  it('applies the migrations once, then reports the schema up to date', async () => {
    const { url } = await freshDatabase('cli_migrate');
    const first = await everdict(['migrate', '--json'], { DATABASE_URL: url });
    expect(first.code).toBe(0);
    const result = JSON.parse(first.stdout) as { applied: string[]; current: number };
    expect(result.applied[0]).toBe('0001_core');
    const second = await everdict(['migrate'], { DATABASE_URL: url });
    expect(second).toMatchObject({ code: 0 });
    expect(second.stdout).toMatch(/^schema up to date at \d+/);
  });

  it('names the missing variable and exits 2', async () => {
    const r = await everdict(['migrate'], {});
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('DATABASE_URL');
  });

  it('refuses an unknown command with exit 2', async () => {
    const r = await everdict(['frobnicate'], {});
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown command "frobnicate"');
  });
});
