/**
 * @everdict/http-api — the one implementation of JSON over node:http that every fleet API uses
 * (DESIGN §7): bodies read against a byte limit, request refusals as typed errors, replies as
 * `{"error", "message", "field"?}`, and `Authorization: Bearer` tokens resolved to the fleet
 * config's principals. Routing and what each route means stay with the service that mounts it.
 */
export * from './principals.js';
export * from './json.js';
export * from './authenticate.js';
