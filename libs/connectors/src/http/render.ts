/**
 * Pure request rendering for the HTTP-service connector, and the review of its configuration.
 * Placeholders are whole path segments' values (URL-encoded) or whole JSON values in the body;
 * a bound value can never change the shape of the request.
 */
import type { EffectParams } from '@everdict/contracts';
import { EverdictError } from '@everdict/contracts';
import type { JsonValue } from '../connector.js';
import { PARAM_NAME, paramSpecProblems } from '../params.js';
import type { HttpMethod, HttpOperationConfig, HttpServiceConfig } from './config.js';
import { HTTP_METHODS } from './config.js';

const PATH_PLACEHOLDER = /\{([^{}]*)\}/g;
const BODY_PLACEHOLDER = /^\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}$/;
const CONNECTOR_NAME = /^[a-z][a-z0-9_-]{0,63}$/;
const OPERATION_NAME = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;
const EFFECT_CLASS = /^[a-z][a-z0-9_-]{0,63}$/;
const IDEMPOTENCY_KEY_PLACEHOLDER = 'idempotencyKey';
// Headers that carry call identity or framing; static config must not be able to override them.
const RESERVED_HEADERS = /^(idempotency-key|everdict-.*|content-length|content-type|host)$/i;

function pathPlaceholders(path: string): string[] {
  return [...path.matchAll(PATH_PLACEHOLDER)].map((m) => m[1] ?? '');
}

function bodyPlaceholders(body: JsonValue | undefined): string[] {
  if (body === undefined || body === null) return [];
  if (typeof body === 'string') {
    const m = BODY_PLACEHOLDER.exec(body);
    return m?.[1] === undefined ? [] : [m[1]];
  }
  if (Array.isArray(body)) return body.flatMap(bodyPlaceholders);
  if (typeof body === 'object') return Object.values(body).flatMap(bodyPlaceholders);
  return [];
}

function renderPath(path: string, values: Readonly<Record<string, string | number | boolean | undefined>>): string {
  return path.replace(PATH_PLACEHOLDER, (_m, name: string) => {
    const value = values[name];
    if (value === undefined) throw new EverdictError('unbound_placeholder', `path placeholder {${name}} has no bound value`, { details: { path: name } });
    return encodeURIComponent(String(value));
  });
}

function renderBody(body: JsonValue, params: EffectParams): JsonValue {
  if (typeof body === 'string') {
    const name = BODY_PLACEHOLDER.exec(body)?.[1];
    if (name === undefined) return body;
    const value = params[name];
    if (value === undefined) throw new EverdictError('unbound_placeholder', `body placeholder {{${name}}} has no bound value`, { details: { path: name } });
    return value;
  }
  if (Array.isArray(body)) return body.map((b) => renderBody(b, params));
  if (body !== null && typeof body === 'object') return Object.fromEntries(Object.entries(body).map(([k, v]) => [k, renderBody(v, params)]));
  return body;
}

interface RenderedRequest {
  readonly method: HttpMethod;
  readonly url: URL;
  readonly body?: string;
}

function joinUrl(baseUrl: string, path: string): URL {
  return new URL(baseUrl.replace(/\/+$/, '') + path);
}

export function renderRequest(baseUrl: string, op: HttpOperationConfig, params: EffectParams): RenderedRequest {
  const url = joinUrl(baseUrl, renderPath(op.path, params));
  return op.body === undefined ? { method: op.method, url } : { method: op.method, url, body: JSON.stringify(renderBody(op.body, params)) };
}

export function renderReceiptLookup(baseUrl: string, path: string, idempotencyKey: string): URL {
  return joinUrl(baseUrl, renderPath(path, { [IDEMPOTENCY_KEY_PLACEHOLDER]: idempotencyKey }));
}

/**
 * Reviews a configuration once, at construction: a connector with an ambiguous or unsafe
 * definition never starts.
 *
 * @throws EverdictError `invalid_connector_config` listing every problem.
 */
export function reviewHttpConfig(config: HttpServiceConfig): void {
  const problems: string[] = [];
  if (!CONNECTOR_NAME.test(config.name)) problems.push('name must match ^[a-z][a-z0-9_-]*$');
  let base: URL | undefined;
  try {
    base = new URL(config.baseUrl);
  } catch {
    problems.push('baseUrl is not a URL');
  }
  if (base !== undefined && base.protocol !== 'http:' && base.protocol !== 'https:') problems.push('baseUrl must be http or https');
  if (base !== undefined && (base.search !== '' || base.hash !== '')) problems.push('baseUrl must not carry a query or fragment');
  if (config.timeoutMs !== undefined && !(config.timeoutMs > 0)) problems.push('timeoutMs must be positive');
  for (const header of Object.keys(config.headers ?? {})) {
    if (RESERVED_HEADERS.test(header)) problems.push(`headers: ${header} is set by the connector itself`);
  }

  if (config.receipts !== undefined) {
    if (!config.receipts.path.startsWith('/')) problems.push('receipts.path must start with /');
    for (const p of pathPlaceholders(config.receipts.path)) {
      if (p !== IDEMPOTENCY_KEY_PLACEHOLDER) problems.push(`receipts.path: {${p}} is not {${IDEMPOTENCY_KEY_PLACEHOLDER}}`);
    }
  }

  const seen = new Set<string>();
  for (const op of config.operations) {
    const where = `operation ${JSON.stringify(op.name)}`;
    if (!OPERATION_NAME.test(op.name)) problems.push(`${where}: name is not a registrable operation name`);
    if (seen.has(op.name)) problems.push(`${where}: declared twice`);
    seen.add(op.name);
    if (!(HTTP_METHODS as readonly string[]).includes(op.method)) problems.push(`${where}: method must be one of ${HTTP_METHODS.join(', ')}`);
    if (!op.path.startsWith('/')) problems.push(`${where}: path must start with /`);
    if (op.kind === 'mutate' && (op.effectClass === undefined || !EFFECT_CLASS.test(op.effectClass))) problems.push(`${where}: a mutation needs an effectClass`);
    if (op.kind === 'read' && op.method !== 'GET') problems.push(`${where}: reads use GET`);
    if (op.method === 'GET' && op.body !== undefined) problems.push(`${where}: GET has no body`);
    for (const [name, spec] of Object.entries(op.params)) problems.push(...paramSpecProblems(name, spec).map((p) => `${where}: ${p}`));
    const used = [...pathPlaceholders(op.path), ...bodyPlaceholders(op.body)];
    for (const name of used) {
      if (!PARAM_NAME.test(name) || !Object.hasOwn(op.params, name)) problems.push(`${where}: placeholder ${JSON.stringify(name)} is not a declared parameter`);
    }
    // Every declared parameter reaches the target: a bound value that is silently dropped would
    // let a packet claim more than the request does.
    for (const name of Object.keys(op.params)) {
      if (!used.includes(name)) problems.push(`${where}: parameter ${name} is declared but not used`);
    }
    if (op.postState !== undefined) problems.push(...postStateProblems(config, op).map((p) => `${where}: postState ${p}`));
  }
  if (problems.length > 0) {
    throw new EverdictError('invalid_connector_config', `connector ${config.name}: ${problems.join('; ')}`, { details: { connector: config.name, problems } });
  }
}

/** A post-state names a registered read and only the mutation's own parameters. */
function postStateProblems(config: HttpServiceConfig, op: HttpOperationConfig): string[] {
  const post = op.postState!;
  const problems: string[] = [];
  if (op.kind !== 'mutate') problems.push('is only for mutations');
  if (!config.operations.some((o) => o.name === post.read && o.kind === 'read')) problems.push(`read ${JSON.stringify(post.read)} is not a registered read of this connector`);
  for (const v of [...Object.values(post.params ?? {}), post.equals]) {
    const name = typeof v === 'string' ? /^\{\{([^{}]+)\}\}$/.exec(v)?.[1] : undefined;
    if (name !== undefined && !Object.hasOwn(op.params, name)) problems.push(`placeholder ${JSON.stringify(name)} is not a parameter of the mutation`);
  }
  return problems;
}
