/**
 * @everdict/http-api — the one implementation of JSON over node:http that every fleet API uses
 * (DESIGN §7): bodies read against a byte limit, request refusals as typed errors, replies as
 * `{"error", "message", "field"?}`, and `Authorization: Bearer` tokens resolved to the fleet
 * config's principals. Every JSON body is checked once, at any depth, for text Postgres cannot
 * store (NUL, lone surrogates: 400 `invalid_text` naming the field, text.ts); numeric query
 * parameters are read as bounded integers (query.ts). Routing and what each route means stay
 * with the service that mounts it.
 */
export * from './principals.js';
export * from './json.js';
export * from './authenticate.js';
export * from './text.js';
export * from './query.js';
