/**
 * The console's static files under /ui (services/intake ui.ts), served by the handler intake
 * mounts, over a real HTTP server: index.html for /ui, /ui/ and client routes; hashed assets with
 * their content type and an immutable cache; a missing asset is 404 (never HTML for a script); no
 * path leaves the dist folder; without a build, 503 naming what to run. The dist folder is found
 * from the source tree the way the image finds it (console/package.json above the module).
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { consoleUi, findConsoleDist, uiFilePath } from '@everdict/intake';

const REPO = resolve(fileURLToPath(new URL('.', import.meta.url)), '../..');

async function serve(dist: string | undefined): Promise<{ url: string; server: Server }> {
  const ui = consoleUi(dist);
  const server = createServer((req, res) => {
    void Promise.resolve(ui(req, res)).then((taken) => {
      if (!taken) {
        res.statusCode = 418;
        res.end();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

let built: { url: string; server: Server };
let missing: { url: string; server: Server };

beforeAll(async () => {
  const dist = join(mkdtempSync(join(tmpdir(), 'everdict-ui-')), 'dist');
  mkdirSync(join(dist, 'assets'), { recursive: true });
  writeFileSync(join(dist, 'index.html'), '<!doctype html><title>Everdict</title><script type="module" src="/ui/assets/index-abc123.js"></script>');
  writeFileSync(join(dist, 'assets', 'index-abc123.js'), 'console.log("everdict")');
  writeFileSync(join(dist, 'assets', 'index-abc123.css'), 'body{}');
  writeFileSync(join(dist, 'favicon.svg'), '<svg/>');
  writeFileSync(join(dist, '..', 'secret.txt'), 'outside');
  built = await serve(dist);
  missing = await serve(join(dist, '..', 'nowhere'));
});

afterAll(async () => {
  await Promise.all([built, missing].map((s) => new Promise((r) => s?.server.close(r))));
});

describe('console static files under /ui', () => {
  it('serves index.html for /ui, /ui/ and client routes, never cached for long', async () => {
    for (const path of ['/ui', '/ui/', '/ui/cases/6f1c/ledger']) {
      const r = await fetch(`${built.url}${path}`);
      expect(r.status, path).toBe(200);
      expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(r.headers.get('cache-control')).toBe('no-cache');
      expect(r.headers.get('content-security-policy')).toContain("default-src 'self'");
      expect(await r.text()).toContain('<title>Everdict</title>');
    }
  });

  it('serves hashed assets with their content type and an immutable cache; a missing asset is 404', async () => {
    const js = await fetch(`${built.url}/ui/assets/index-abc123.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(js.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await js.text()).toBe('console.log("everdict")');
    const css = await fetch(`${built.url}/ui/assets/index-abc123.css`);
    expect(css.headers.get('content-type')).toBe('text/css; charset=utf-8');
    const svg = await fetch(`${built.url}/ui/favicon.svg`);
    expect([svg.status, svg.headers.get('content-type'), svg.headers.get('cache-control')]).toEqual([200, 'image/svg+xml', 'no-cache']);
    expect((await fetch(`${built.url}/ui/assets/index-old999.js`)).status).toBe(404);
  });

  it('never leaves the dist folder', async () => {
    expect(uiFilePath('/srv/dist', '/ui/../secret.txt')).toBeUndefined();
    expect(uiFilePath('/srv/dist', '/ui/%2e%2e/secret.txt')).toBeUndefined();
    expect(uiFilePath('/srv/dist', '/ui/a%00b')).toBeUndefined();
    expect(uiFilePath('/srv/dist', '/ui/assets/x.js')).toBe('/srv/dist/assets/x.js');
    // Sent byte for byte (fetch would normalise the path first): an encoded slash after `..`.
    const raw = await new Promise<{ status: number; body: string }>((done, fail) => {
      const req = request(`${built.url}/ui/..%2fsecret.txt`, (res) => {
        let body = '';
        res.on('data', (b: Buffer) => (body += b.toString('utf8')));
        res.on('end', () => done({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', fail);
      req.end();
    });
    expect(raw.status).toBe(404);
    expect(raw.body).not.toContain('outside');
  });

  it('answers 503 naming the build without a console/dist, and leaves other paths alone', async () => {
    const r = await fetch(`${missing.url}/ui/`);
    expect(r.status).toBe(503);
    expect(((await r.json()) as { error: string; message: string }).message).toContain('npm run build');
    expect((await fetch(`${missing.url}/v1/cases`)).status).toBe(418);
    expect((await fetch(`${missing.url}/uix`)).status).toBe(418);
    expect((await fetch(`${built.url}/ui/`, { method: 'POST' })).status).toBe(405);
  });

  it('finds console/dist from the installed package (source tree here, /app in the image)', () => {
    expect(findConsoleDist(join(REPO, 'services', 'intake', 'src'))).toBe(join(REPO, 'console', 'dist'));
    expect(findConsoleDist(join(REPO, 'services', 'intake', 'dist', 'src'))).toBe(join(REPO, 'console', 'dist'));
    expect(findConsoleDist('/')).toBeUndefined();
  });
});
