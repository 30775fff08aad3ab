/**
 * The demo target of embedded mode: a tiny "notebook" HTTP service the embedded node serves on
 * its own port under /demo/notes, and the variable that points the sample fleet's `notes`
 * connector at it. It exists so that `npm start` alone shows a whole effect — proposed, audited,
 * approved by a human, executed once by the coordinator — without any external system. DEMO
 * ONLY: it has no authentication, and nothing but the sample config should point at it.
 *
 *   POST /demo/notes/notes            {"text"} with Idempotency-Key → 201 receipt (200 the same
 *                                     receipt for a key already applied; 422 for a burnt key)
 *   GET  /demo/notes/notes            {"count", "notes": [the last 50]}
 *   GET  /demo/notes/receipts/:key    200 receipt, or 404 — and the key is burnt
 *
 * Invariants (what lets the connector declare its receipts conclusive):
 * - A note and its receipt are written together, atomically (write-to-temp, fsync, rename),
 *   before the 201 is sent; a receipt answered once is answered again after a restart.
 * - A receipt lookup that finds nothing burns the key in the same kind of write before the 404
 *   is sent, so a request still in flight with that key can never apply later: a 404 is proof.
 * - Requests are handled one at a time (a FIFO), so a lookup and an append never interleave.
 */
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { dirname, join } from 'node:path';
import type { RouteHandler } from '@everdict/service-kit';

const DEMO_NOTES_PREFIX = '/demo/notes';
const MAX_BODY_BYTES = 16 * 1024;
const MAX_TEXT = 500;
const KEY = /^[\x21-\x7e]{1,200}$/;

interface Note {
  readonly noteId: number;
  readonly text: string;
  readonly at: string;
}

interface NotebookState {
  notes: Note[];
  receipts: Record<string, { noteId: number; text: string; count: number }>;
  burnt: string[];
}

/** The notebook's state file, rewritten whole (it stays small: a demo appends a handful of notes). */
class NotebookFile {
  constructor(private readonly path: string) {}

  load(): NotebookState {
    if (!existsSync(this.path)) return { notes: [], receipts: {}, burnt: [] };
    return JSON.parse(readFileSync(this.path, 'utf8')) as NotebookState;
  }

  save(state: NotebookState): void {
    mkdirSync(dirname(this.path), { recursive: true });
    const tmp = `${this.path}.tmp`;
    const fd = openSync(tmp, 'w');
    try {
      writeSync(fd, JSON.stringify(state));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.path);
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('content-type', 'application/json');
  res.setHeader('content-length', Buffer.byteLength(text));
  res.end(text);
}

async function readBody(req: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The notebook's routes, state kept in `<dataDir>/demo-notes.json`. */
export function demoNotesRoutes(dataDir: string): RouteHandler {
  const file = new NotebookFile(join(dataDir, 'demo-notes.json'));
  let lane: Promise<unknown> = Promise.resolve();
  const serialised = <T>(job: () => Promise<T>): Promise<T> => {
    const next = lane.then(job);
    lane = next.catch(() => undefined);
    return next;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse, path: string): Promise<void> => {
    const state = file.load();
    if (path === '/notes' && req.method === 'GET') return send(res, 200, { count: state.notes.length, notes: state.notes.slice(-50) });
    if (path === '/notes' && req.method === 'POST') {
      const key = req.headers['idempotency-key'];
      if (typeof key !== 'string' || !KEY.test(key)) return send(res, 400, { error: 'idempotency_key_required' });
      const prior = state.receipts[key];
      if (prior) return send(res, 200, prior);
      if (state.burnt.includes(key)) return send(res, 422, { error: 'idempotency_key_burnt' });
      const raw = await readBody(req);
      if (raw === undefined) return send(res, 413, { error: 'body_too_large' });
      let text: unknown;
      try {
        text = (JSON.parse(raw) as { text?: unknown }).text;
      } catch {
        return send(res, 400, { error: 'invalid_json' });
      }
      if (typeof text !== 'string' || text.length === 0 || text.length > MAX_TEXT) return send(res, 400, { error: 'invalid_text' });
      const note: Note = { noteId: state.notes.length + 1, text, at: new Date().toISOString() };
      const receipt = { noteId: note.noteId, text, count: state.notes.length + 1 };
      state.notes.push(note);
      state.receipts[key] = receipt;
      file.save(state);
      return send(res, 201, receipt);
    }
    const lookup = /^\/receipts\/([^/]+)$/.exec(path);
    if (lookup && req.method === 'GET') {
      const key = decodeURIComponent(lookup[1]!);
      const receipt = state.receipts[key];
      if (receipt) return send(res, 200, receipt);
      if (!state.burnt.includes(key)) {
        state.burnt.push(key);
        file.save(state);
      }
      return send(res, 404, { error: 'no_receipt' });
    }
    send(res, 404, { error: 'not_found' });
  };

  return (req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    if (path !== DEMO_NOTES_PREFIX && !path.startsWith(`${DEMO_NOTES_PREFIX}/`)) return false;
    return serialised(() => handle(req, res, path.slice(DEMO_NOTES_PREFIX.length))).then(() => true);
  };
}

/**
 * The variable the sample fleet config's `notes` connector takes its base URL from
 * (`baseUrlEnv`). The embedded node sets it to its own notebook when it is unset; compose sets it
 * to the intake container's.
 */
export const DEMO_NOTES_URL_ENV = 'EVERDICT_DEMO_NOTES_URL';

/** The base URL of the notebook a node serves on `port`. */
export function demoNotesUrl(port: number): string {
  return `http://127.0.0.1:${port}${DEMO_NOTES_PREFIX}`;
}
