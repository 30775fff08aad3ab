/**
 * The operator console's static files (console/, built by Vite into console/dist), served by
 * intake under `/ui`:
 *
 *   GET /ui, /ui/          index.html (no-cache: a new build is picked up at the next load)
 *   GET /ui/assets/*       the hashed bundles, `immutable` for a year (a new build has new names);
 *                          a missing asset is 404 (never HTML where a script is expected)
 *   GET /ui/<anything>     the file if it exists, else index.html (client-side routes)
 *
 * The page talks only to the public HTTP API (/v1/…), with the session cookie. The dist folder is
 * found by walking up from this module to the `console` workspace (works from src/, dist/src/ and
 * the image's /app tree). Without a build, /ui answers 503 naming what to run; intake still
 * serves the API. A request path is decoded, normalised and served only when it stays inside
 * the dist folder (no `..` out of it, no NUL).
 */
import { existsSync } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { dirname, extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sendError } from '@everdict/http-api';
import type { RouteHandler } from '@everdict/service-kit';

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.ico': 'image/x-icon',
  '.webp': 'image/webp',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
};

const IMMUTABLE = 'public, max-age=31536000, immutable';
const CSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'";

/** console/dist above `from` (the first `console/package.json` found walking up), or undefined. */
export function findConsoleDist(from: string = dirname(fileURLToPath(import.meta.url))): string | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'console', 'package.json'))) return join(dir, 'console', 'dist');
    if (dirname(dir) === dir) return undefined;
  }
}

/** The file under `root` a request path names, or undefined when it would leave `root`. Pure. */
export function uiFilePath(root: string, urlPath: string): string | undefined {
  let rel: string;
  try {
    rel = decodeURIComponent(urlPath.replace(/^\/ui\/?/, ''));
  } catch {
    return undefined;
  }
  if (rel.includes('\0')) return undefined;
  const full = normalize(join(root, rel));
  return full === root || full.startsWith(root.endsWith(sep) ? root : root + sep) ? full : undefined;
}

async function isFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile();
  } catch {
    return false;
  }
}

async function sendFile(req: IncomingMessage, res: ServerResponse, path: string, cache: string): Promise<void> {
  const bytes = await readFile(path);
  res.statusCode = 200;
  res.setHeader('content-type', CONTENT_TYPES[extname(path).toLowerCase()] ?? 'application/octet-stream');
  res.setHeader('content-length', bytes.length);
  res.setHeader('cache-control', cache);
  res.setHeader('x-content-type-options', 'nosniff');
  if (path.endsWith('.html')) {
    res.setHeader('content-security-policy', CSP);
    res.setHeader('x-frame-options', 'DENY');
    res.setHeader('referrer-policy', 'no-referrer');
  }
  res.end(req.method === 'HEAD' ? undefined : bytes);
}

export function consoleUi(distDir: string | undefined = findConsoleDist()): RouteHandler {
  return async (req, res) => {
    const path = new URL(req.url ?? '/', 'http://ui.invalid').pathname;
    if (path !== '/ui' && !path.startsWith('/ui/')) return false;
    if (req.method !== 'GET' && req.method !== 'HEAD') return (sendError(res, 405, 'method_not_allowed', `${req.method ?? ''} is not allowed here`), true);
    const index = distDir === undefined ? undefined : join(distDir, 'index.html');
    if (distDir === undefined || index === undefined || !(await isFile(index))) {
      res.setHeader('retry-after', '60');
      sendError(res, 503, 'console_not_built', 'the operator console is not built: run `npm run build` (console/dist is missing); the API under /v1 is unaffected');
      return true;
    }
    const file = uiFilePath(distDir, path);
    if (file === undefined) return (sendError(res, 404, 'not_found', 'no such file'), true);
    if (file !== distDir && (await isFile(file))) {
      await sendFile(req, res, file, path.startsWith('/ui/assets/') ? IMMUTABLE : 'no-cache');
      return true;
    }
    if (path.startsWith('/ui/assets/')) return (sendError(res, 404, 'not_found', 'no such asset'), true);
    await sendFile(req, res, index, 'no-cache');
    return true;
  };
}
