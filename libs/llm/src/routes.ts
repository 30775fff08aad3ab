/**
 * Model routes from the fleet config: route name → { adapter, model, baseUrl?, apiKeyEnv?,
 * scriptPath?, timeoutMs?, maxOutputTokens? }. A route swap changes which adapter serves the
 * next call and nothing else: no task or session record names an adapter, only a route.
 * API keys are read from the environment variable the route names, never from the config.
 */
import { isAbsolute, resolve } from 'node:path';
import { EverdictError, payloadHash } from '@everdict/contracts';
import { anthropicClient } from './anthropic.js';
import type { FetchLike } from './http.js';
import { ADAPTER_KINDS, type AdapterKind, type ModelClient, type RouteIdentity } from './model.js';
import { openAiClient } from './openai.js';
import { loadModelScript, scriptedClient } from './scripted.js';

export interface RouteConfig {
  readonly adapter: AdapterKind;
  readonly model: string;
  /** Required for `openai`; default https://api.anthropic.com for `anthropic`. */
  readonly baseUrl?: string;
  /** Name of the environment variable holding the API key. */
  readonly apiKeyEnv?: string;
  /** Required for `scripted`; relative paths resolve against the config's directory. */
  readonly scriptPath?: string;
  /** Per-call timeout. Default 60 000 ms. */
  readonly timeoutMs?: number;
  readonly maxOutputTokens?: number;
  /** The model's context window in tokens (compaction measures a run's context against it). */
  readonly contextWindowTokens?: number;
}

export type RouteTable = Readonly<Record<string, RouteConfig>>;

interface RouteDeps {
  /** Default `process.env`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Directory relative script paths resolve against. Default `process.cwd()`. */
  readonly baseDir?: string;
  readonly fetch?: FetchLike;
}

const ROUTE_KEYS = new Set(['adapter', 'model', 'baseUrl', 'apiKeyEnv', 'scriptPath', 'timeoutMs', 'maxOutputTokens', 'contextWindowTokens']);

/** Shape check of one route; the error names `routes.<name>.<field>`. */
export function validateRoute(name: string, value: unknown): RouteConfig {
  const field = (f: string) => `routes.${name}.${f}`;
  const bad = (f: string, why: string): never => {
    throw new EverdictError('invalid_route', `${field(f)} ${why}`, { details: { field: field(f), route: name } });
  };
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new EverdictError('invalid_route', `routes.${name} must be an object`, { details: { field: `routes.${name}` } });
  const r = value as Record<string, unknown>;
  for (const key of Object.keys(r)) if (!ROUTE_KEYS.has(key)) bad(key, 'is not a route field');
  if (!(ADAPTER_KINDS as readonly string[]).includes(r.adapter as string)) bad('adapter', `must be one of ${ADAPTER_KINDS.join('|')}`);
  if (typeof r.model !== 'string' || r.model === '') bad('model', 'must be a non-empty string');
  for (const key of ['baseUrl', 'apiKeyEnv', 'scriptPath']) {
    if (r[key] !== undefined && (typeof r[key] !== 'string' || r[key] === '')) bad(key, 'must be a non-empty string');
  }
  for (const key of ['timeoutMs', 'maxOutputTokens', 'contextWindowTokens']) {
    const v = r[key];
    if (v !== undefined && (typeof v !== 'number' || !Number.isInteger(v) || v <= 0)) bad(key, 'must be a positive integer');
  }
  if (r.baseUrl !== undefined) {
    try {
      new URL(r.baseUrl as string);
    } catch {
      bad('baseUrl', 'must be an absolute URL');
    }
  }
  if (r.adapter === 'openai' && r.baseUrl === undefined) bad('baseUrl', 'is required for adapter openai');
  if (r.adapter === 'scripted' && r.scriptPath === undefined) bad('scriptPath', 'is required for adapter scripted');
  return r as unknown as RouteConfig;
}

function validateRouteTable(value: unknown): RouteTable {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new EverdictError('invalid_route', 'routes must be an object', { details: { field: 'routes' } });
  const out: Record<string, RouteConfig> = {};
  for (const [name, route] of Object.entries(value)) out[name] = validateRoute(name, route);
  return out;
}

export function routeIdentity(name: string, route: RouteConfig): RouteIdentity {
  return { name, adapter: route.adapter, model: route.model, configHash: payloadHash(route) };
}

/** Builds the client for one route. The only place an adapter is chosen. */
export function createModelClient(name: string, config: RouteConfig, deps: RouteDeps = {}): ModelClient {
  const route = validateRoute(name, config);
  const identity = routeIdentity(name, route);
  const env = deps.env ?? process.env;
  let apiKey: string | undefined;
  if (route.apiKeyEnv !== undefined) {
    apiKey = env[route.apiKeyEnv];
    if (apiKey === undefined || apiKey === '') {
      throw new EverdictError('missing_api_key', `routes.${name}.apiKeyEnv names ${route.apiKeyEnv}, which is not set`, { details: { field: `routes.${name}.apiKeyEnv`, route: name } });
    }
  }
  switch (route.adapter) {
    case 'openai':
      return openAiClient({ route: identity, baseUrl: route.baseUrl as string, apiKey, timeoutMs: route.timeoutMs, maxOutputTokens: route.maxOutputTokens, fetch: deps.fetch });
    case 'anthropic':
      return anthropicClient({ route: identity, baseUrl: route.baseUrl, apiKey, timeoutMs: route.timeoutMs, maxOutputTokens: route.maxOutputTokens, fetch: deps.fetch });
    case 'scripted': {
      const path = route.scriptPath as string;
      const full = isAbsolute(path) ? path : resolve(deps.baseDir ?? process.cwd(), path);
      return scriptedClient({ route: identity, script: () => loadModelScript(full) });
    }
  }
}

/**
 * Resolves route names to clients, caching one client per (name, config hash). `replace`
 * swaps the table: the next `client(name)` serves the new adapter, earlier calls keep the
 * identity they were served by.
 */
export class ModelRouter {
  private table: RouteTable;
  private readonly cache = new Map<string, ModelClient>();

  constructor(
    routes: RouteTable,
    private readonly deps: RouteDeps = {},
  ) {
    this.table = validateRouteTable(routes);
  }

  replace(routes: RouteTable): void {
    this.table = validateRouteTable(routes);
  }

  routeNames(): string[] {
    return Object.keys(this.table);
  }

  client(name: string): ModelClient {
    const config = this.table[name];
    if (config === undefined) throw new EverdictError('unknown_route', `route ${name} is not configured`, { details: { field: 'route', route: name } });
    const key = `${name}\u0000${routeIdentity(name, config).configHash}`;
    let client = this.cache.get(key);
    if (client === undefined) {
      client = createModelClient(name, config, this.deps);
      this.cache.set(key, client);
    }
    return client;
  }
}
