/**
 * The broker topology. `rabbitmq/definitions.json` is the single source: operators import it
 * (`rabbitmqctl import_definitions`, or `load_definitions` at boot) and every service asserts the
 * very same exchanges, queues, arguments and bindings at start, so a drifted broker fails loudly
 * (PRECONDITION_FAILED) instead of silently routing elsewhere.
 *
 * Names in the file start with `everdict.`; a prefix swaps that for `<prefix>.` so each test file
 * gets an isolated copy of the whole topology (DESIGN §8). Queue arguments that name an exchange
 * (`x-dead-letter-exchange`) are renamed with it.
 *
 * Shape (see rabbitmq/README.md): a topic exchange `<p>.events` routed by message type, a direct
 * dead-letter exchange `<p>.dlx`, and per consuming service a quorum queue `<p>.<service>` with a
 * delivery limit that dead-letters into `<p>.<service>.dead`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EverdictError } from '@everdict/contracts';

const PRODUCTION_PREFIX = 'everdict';

type ArgumentValue = string | number | boolean;

export interface ExchangeDef {
  readonly name: string;
  readonly type: 'topic' | 'direct' | 'fanout';
  readonly durable: boolean;
  readonly autoDelete: boolean;
  readonly internal: boolean;
  readonly arguments: Readonly<Record<string, ArgumentValue>>;
}

export interface QueueDef {
  readonly name: string;
  readonly durable: boolean;
  readonly autoDelete: boolean;
  readonly arguments: Readonly<Record<string, ArgumentValue>>;
}

export interface BindingDef {
  readonly source: string;
  readonly destination: string;
  readonly routingKey: string;
  readonly arguments: Readonly<Record<string, ArgumentValue>>;
}

/** The topology under one prefix: plain data, derived from the definitions file. */
export interface Topology {
  readonly prefix: string;
  readonly exchanges: readonly ExchangeDef[];
  readonly queues: readonly QueueDef[];
  readonly bindings: readonly BindingDef[];
}

export class TopologyError extends EverdictError {
  constructor(message: string, field: string) {
    super('topology_invalid', message, { details: { field } });
  }
}

/** Finds rabbitmq/definitions.json by walking up from this module (works from src/ and dist/src/). */
export function findDefinitionsFile(from: string = dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'rabbitmq', 'definitions.json');
    if (existsSync(candidate)) return candidate;
    if (dirname(dir) === dir) throw new TopologyError(`rabbitmq/definitions.json not found above ${from}`, 'definitionsPath');
  }
}

/** Reads and validates the definitions file, then applies the name prefix. */
export function loadTopology(opts: { prefix?: string; definitionsPath?: string } = {}): Topology {
  const path = opts.definitionsPath ?? findDefinitionsFile();
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new TopologyError(`cannot read ${path}: ${err instanceof Error ? err.message : String(err)}`, 'definitionsPath');
  }
  return withPrefix(parseDefinitions(raw), opts.prefix ?? PRODUCTION_PREFIX);
}

// --- parsing (pure) -------------------------------------------------------------------------

type Json = Record<string, unknown>;

function obj(v: unknown, field: string): Json {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new TopologyError(`${field} must be an object`, field);
  return v as Json;
}

function arr(v: unknown, field: string): unknown[] {
  if (!Array.isArray(v)) throw new TopologyError(`${field} must be an array`, field);
  return v;
}

function str(v: unknown, field: string): string {
  if (typeof v !== 'string' || v.length === 0) throw new TopologyError(`${field} must be a non-empty string`, field);
  return v;
}

function bool(v: unknown, field: string): boolean {
  if (typeof v !== 'boolean') throw new TopologyError(`${field} must be a boolean`, field);
  return v;
}

function args(v: unknown, field: string): Record<string, ArgumentValue> {
  const o = obj(v ?? {}, field);
  for (const [k, val] of Object.entries(o)) {
    if (!['string', 'number', 'boolean'].includes(typeof val)) throw new TopologyError(`${field}.${k} must be a string, number or boolean`, `${field}.${k}`);
  }
  return o as Record<string, ArgumentValue>;
}

function vhost(v: unknown, field: string): void {
  if (v !== '/') throw new TopologyError(`${field} must be "/"`, field);
}

function ownName(name: string, field: string): string {
  if (!name.startsWith(`${PRODUCTION_PREFIX}.`)) throw new TopologyError(`${field} ${JSON.stringify(name)} must start with "${PRODUCTION_PREFIX}."`, field);
  return name;
}

/** Validates the RabbitMQ definitions document; names stay production names. */
export function parseDefinitions(raw: unknown): Topology {
  const d = obj(raw, 'definitions');
  const exchanges = arr(d['exchanges'], 'exchanges').map((e, i): ExchangeDef => {
    const f = `exchanges[${i}]`;
    const x = obj(e, f);
    vhost(x['vhost'], `${f}.vhost`);
    const type = str(x['type'], `${f}.type`);
    if (type !== 'topic' && type !== 'direct' && type !== 'fanout') throw new TopologyError(`${f}.type must be topic, direct or fanout`, `${f}.type`);
    return {
      name: ownName(str(x['name'], `${f}.name`), `${f}.name`),
      type,
      durable: bool(x['durable'], `${f}.durable`),
      autoDelete: bool(x['auto_delete'], `${f}.auto_delete`),
      internal: bool(x['internal'], `${f}.internal`),
      arguments: args(x['arguments'], `${f}.arguments`),
    };
  });
  const queues = arr(d['queues'], 'queues').map((q, i): QueueDef => {
    const f = `queues[${i}]`;
    const x = obj(q, f);
    vhost(x['vhost'], `${f}.vhost`);
    return {
      name: ownName(str(x['name'], `${f}.name`), `${f}.name`),
      durable: bool(x['durable'], `${f}.durable`),
      autoDelete: bool(x['auto_delete'], `${f}.auto_delete`),
      arguments: args(x['arguments'], `${f}.arguments`),
    };
  });
  const exchangeNames = new Set(exchanges.map((e) => e.name));
  const queueNames = new Set(queues.map((q) => q.name));
  const bindings = arr(d['bindings'], 'bindings').map((b, i): BindingDef => {
    const f = `bindings[${i}]`;
    const x = obj(b, f);
    vhost(x['vhost'], `${f}.vhost`);
    if (x['destination_type'] !== 'queue') throw new TopologyError(`${f}.destination_type must be "queue"`, `${f}.destination_type`);
    const source = str(x['source'], `${f}.source`);
    const destination = str(x['destination'], `${f}.destination`);
    if (!exchangeNames.has(source)) throw new TopologyError(`${f}.source ${JSON.stringify(source)} is not a declared exchange`, `${f}.source`);
    if (!queueNames.has(destination)) throw new TopologyError(`${f}.destination ${JSON.stringify(destination)} is not a declared queue`, `${f}.destination`);
    return { source, destination, routingKey: typeof x['routing_key'] === 'string' ? x['routing_key'] : '', arguments: args(x['arguments'], `${f}.arguments`) };
  });
  queues.forEach((q, i) => {
    const dlx = q.arguments['x-dead-letter-exchange'];
    if (dlx !== undefined && !exchangeNames.has(String(dlx))) {
      throw new TopologyError(`queues[${i}].arguments.x-dead-letter-exchange names no declared exchange`, `queues[${i}].arguments.x-dead-letter-exchange`);
    }
  });
  return { prefix: PRODUCTION_PREFIX, exchanges, queues, bindings };
}

/** Renames every `everdict.` name (and exchange-naming argument) to `<prefix>.`. */
export function withPrefix(topology: Topology, prefix: string): Topology {
  if (!/^[A-Za-z0-9_-]+$/.test(prefix)) throw new TopologyError(`prefix ${JSON.stringify(prefix)} must be letters, digits, _ or -`, 'prefix');
  const rename = (name: string): string => (name.startsWith(`${topology.prefix}.`) ? `${prefix}.${name.slice(topology.prefix.length + 1)}` : name);
  const renameArgs = (a: Readonly<Record<string, ArgumentValue>>): Record<string, ArgumentValue> => {
    const out = { ...a };
    const dlx = out['x-dead-letter-exchange'];
    if (typeof dlx === 'string') out['x-dead-letter-exchange'] = rename(dlx);
    return out;
  };
  return {
    prefix,
    exchanges: topology.exchanges.map((e) => ({ ...e, name: rename(e.name), arguments: { ...e.arguments } })),
    queues: topology.queues.map((q) => ({ ...q, name: rename(q.name), arguments: renameArgs(q.arguments) })),
    bindings: topology.bindings.map((b) => ({ ...b, source: rename(b.source), destination: rename(b.destination), arguments: { ...b.arguments } })),
  };
}

// --- lookups (pure) -------------------------------------------------------------------------

/** The exchange every outbox row is published to, routed by message type. */
export function eventsExchange(t: Topology): string {
  return `${t.prefix}.events`;
}

export function serviceQueue(t: Topology, service: string): QueueDef {
  const q = t.queues.find((x) => x.name === `${t.prefix}.${service}`);
  if (!q) throw new TopologyError(`no queue for service ${JSON.stringify(service)} in the topology`, 'service');
  return q;
}

/** Consuming services: the queues that dead-letter somewhere. */
export function consumingServices(t: Topology): string[] {
  return t.queues.filter((q) => q.arguments['x-dead-letter-exchange'] !== undefined).map((q) => q.name.slice(t.prefix.length + 1));
}

/** Redeliveries allowed after the first delivery before the broker dead-letters (x-delivery-limit). */
export function deliveryLimit(t: Topology, service: string): number {
  const limit = serviceQueue(t, service).arguments['x-delivery-limit'];
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 0) {
    throw new TopologyError(`queue of ${service} has no integer x-delivery-limit`, `queues.${service}.arguments.x-delivery-limit`);
  }
  return limit;
}

/** The queue a service's dead letters land in (via its DLX and dead-letter routing key). */
export function deadLetterQueue(t: Topology, service: string): string {
  const q = serviceQueue(t, service);
  const dlx = q.arguments['x-dead-letter-exchange'];
  const key = q.arguments['x-dead-letter-routing-key'] ?? '';
  if (typeof dlx !== 'string') throw new TopologyError(`queue of ${service} has no x-dead-letter-exchange`, `queues.${service}.arguments.x-dead-letter-exchange`);
  const target = route(t, dlx, String(key));
  if (target.length !== 1) throw new TopologyError(`dead letters of ${service} route to ${target.length} queues, expected 1`, `queues.${service}.arguments.x-dead-letter-routing-key`);
  return target[0]!;
}

/** Message types (routing keys) bound from the events exchange to a service's queue. */
export function boundTypes(t: Topology, service: string): string[] {
  const queue = serviceQueue(t, service).name;
  return t.bindings.filter((b) => b.source === eventsExchange(t) && b.destination === queue).map((b) => b.routingKey);
}

/**
 * AMQP topic matching: words split on ".", `*` matches exactly one word, `#` zero or more.
 * Used by the in-process transport so it routes exactly as the broker would.
 */
export function topicMatches(pattern: string, routingKey: string): boolean {
  const p = pattern.split('.');
  const k = routingKey.split('.');
  const match = (i: number, j: number): boolean => {
    if (i === p.length) return j === k.length;
    if (p[i] === '#') {
      for (let skip = j; skip <= k.length; skip++) if (match(i + 1, skip)) return true;
      return false;
    }
    if (j === k.length) return false;
    return (p[i] === '*' || p[i] === k[j]) && match(i + 1, j + 1);
  };
  return match(0, 0);
}

/** Queues a message published to `exchange` with `routingKey` lands in (each at most once). */
export function route(t: Topology, exchange: string, routingKey: string): string[] {
  const ex = t.exchanges.find((e) => e.name === exchange);
  if (!ex) return [];
  const hit = (b: BindingDef): boolean => {
    if (ex.type === 'fanout') return true;
    if (ex.type === 'direct') return b.routingKey === routingKey;
    return topicMatches(b.routingKey, routingKey);
  };
  return [...new Set(t.bindings.filter((b) => b.source === exchange && hit(b)).map((b) => b.destination))];
}

// --- asserting (I/O through a narrow channel port) -------------------------------------------

/** The part of an amqplib channel that asserting needs. */
export interface TopologyChannel {
  assertExchange(name: string, type: string, options: { durable: boolean; autoDelete: boolean; internal: boolean; arguments: Record<string, unknown> }): Promise<unknown>;
  assertQueue(name: string, options: { durable: boolean; autoDelete: boolean; exclusive: boolean; arguments: Record<string, unknown> }): Promise<unknown>;
  bindQueue(queue: string, source: string, pattern: string, args: Record<string, unknown>): Promise<unknown>;
  /** Passive declares: need no permission, fail (channel error 404) when the entity is missing. */
  checkExchange(name: string): Promise<unknown>;
  checkQueue(name: string): Promise<unknown>;
}

/**
 * Declares exactly the topology, with identical arguments. A pre-existing entity with different
 * arguments makes the broker close the channel with PRECONDITION_FAILED: drift is an error.
 */
export async function assertTopology(ch: TopologyChannel, t: Topology): Promise<void> {
  for (const e of t.exchanges) {
    await ch.assertExchange(e.name, e.type, { durable: e.durable, autoDelete: e.autoDelete, internal: e.internal, arguments: { ...e.arguments } });
  }
  for (const q of t.queues) {
    await ch.assertQueue(q.name, { durable: q.durable, autoDelete: q.autoDelete, exclusive: false, arguments: { ...q.arguments } });
  }
  for (const b of t.bindings) {
    await ch.bindQueue(b.destination, b.source, b.routingKey, { ...b.arguments });
  }
}

/**
 * What a connection authenticated as one service asserts (per-service broker users, which may
 * configure only their own queues): that service's queue and dead-letter queue with their
 * arguments and bindings are declared exactly; every other exchange and queue must exist
 * (passive), so nothing is published into a missing queue. The operator's definitions import
 * owns the shared entities; each service's own queues are still checked for drift by the
 * service itself.
 */
export async function assertTopologyFor(ch: TopologyChannel, t: Topology, service: string): Promise<void> {
  const own = new Set([`${t.prefix}.${service}`, `${t.prefix}.${service}.dead`]);
  for (const e of t.exchanges) await ch.checkExchange(e.name);
  for (const q of t.queues) {
    if (own.has(q.name)) await ch.assertQueue(q.name, { durable: q.durable, autoDelete: q.autoDelete, exclusive: false, arguments: { ...q.arguments } });
    else await ch.checkQueue(q.name);
  }
  for (const b of t.bindings) {
    if (own.has(b.destination)) await ch.bindQueue(b.destination, b.source, b.routingKey, { ...b.arguments });
  }
}

interface TopologyDeleteChannel {
  deleteQueue(name: string): Promise<unknown>;
  deleteExchange(name: string): Promise<unknown>;
}

/** Removes a (test) topology: queues first, then exchanges. */
export async function deleteTopology(ch: TopologyDeleteChannel, t: Topology): Promise<void> {
  for (const q of t.queues) await ch.deleteQueue(q.name);
  for (const e of t.exchanges) await ch.deleteExchange(e.name);
}
