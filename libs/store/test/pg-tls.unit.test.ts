/**
 * node-postgres itself turns DATABASE_URL's `sslmode` and `sslrootcert` into its TLS options (the
 * CA file read by path); service-kit's `pgUrlWithTls` relies on exactly this.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'pg-connection-string';
import { afterAll, describe, expect, it } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'everdict-pg-tls-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('Postgres TLS in the connection URL', () => {
  it('verify-full with sslrootcert: TLS on, the CA from the file, the server name checked', () => {
    const ca = join(dir, 'ca.pem');
    writeFileSync(ca, 'PEM-CA');
    const cfg = parse(`postgres://app:pw@db.example:5432/everdict?sslmode=verify-full&sslrootcert=${encodeURIComponent(ca)}`);
    expect(cfg.ssl).toMatchObject({ ca: 'PEM-CA' });
    expect((cfg.ssl as { rejectUnauthorized?: boolean }).rejectUnauthorized).not.toBe(false);
  });

  it('disable: no TLS; no-verify: TLS without certificate checks', () => {
    expect(parse('postgres://db/everdict?sslmode=disable').ssl).toBe(false);
    expect(parse('postgres://db/everdict?sslmode=no-verify').ssl).toMatchObject({ rejectUnauthorized: false });
  });
});
