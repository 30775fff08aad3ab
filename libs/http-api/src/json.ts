/**
 * JSON over node:http: bounded body reads, typed request refusals, replies. Every reply is
 * `application/json`, `cache-control: no-store`, with an exact content-length; every error body
 * is `{"error": code, "message", "field"?}`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { describeBadText, findBadText } from './text.js';

/** A refusal of the request itself; `field` names the offending field when there is one. */
export class RequestError extends Error {
  constructor(readonly status: 400 | 403 | 404 | 409 | 413 | 415 | 422, readonly error: string, message: string, readonly field?: string) {
    super(message);
  }
}

/**
 * The raw body, refused with 413 as soon as it is known to pass `maxBytes`: from a larger
 * declared content-length before reading, else at the chunk that crosses it (nothing more is
 * buffered).
 */
export async function readRawBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) throw new RequestError(413, 'body_too_large', `the body exceeds ${maxBytes} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > maxBytes) throw new RequestError(413, 'body_too_large', `the body exceeds ${maxBytes} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * An `application/json` body that is a JSON object: 415, 413 or 400 (field `body`) otherwise;
 * 400 `invalid_text` naming the field when any string in it holds a NUL or a lone surrogate.
 */
export async function readJsonObject(req: IncomingMessage, maxBytes: number): Promise<Record<string, unknown>> {
  const type = req.headers['content-type'] ?? '';
  if (!/^application\/json\b/i.test(type)) throw new RequestError(415, 'unsupported_media_type', 'the body must be application/json');
  const raw = await readRawBody(req, maxBytes);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch {
    throw new RequestError(400, 'invalid_json', 'the body is not valid JSON', 'body');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new RequestError(400, 'invalid_body', 'the body must be a JSON object', 'body');
  // Every accepted string field, at any depth: text Postgres cannot store is refused here.
  const bad = findBadText(parsed);
  if (bad) throw new RequestError(400, 'invalid_text', describeBadText(bad), bad.field);
  return parsed as Record<string, unknown>;
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('content-type', 'application/json');
  res.setHeader('cache-control', 'no-store');
  res.setHeader('content-length', Buffer.byteLength(text));
  res.end(text);
}

export function sendError(res: ServerResponse, status: number, error: string, message: string, field?: string): void {
  sendJson(res, status, { error, message, ...(field ? { field } : {}) });
}

/** The reply for a RequestError. */
export function sendRequestError(res: ServerResponse, err: RequestError): void {
  sendError(res, err.status, err.error, err.message, err.field);
}
