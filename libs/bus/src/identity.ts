/**
 * Producer authentication at the transport (seed 004 §4, issue 12): which broker user speaks for
 * which service, and whether an authenticated delivery may carry what it claims.
 *
 * Two modes, always explicit:
 * - per-service (`EVERDICT_AMQP_USERS` set, production): every service has its own broker user;
 *   a user speaks for exactly the service it is mapped to. The broker validates the AMQP
 *   `user_id` property against the connection's login, so a delivery's user is authenticated.
 * - shared (only AMQP_URL): every service of the fleet connects as the one user in AMQP_URL, so
 *   that user speaks for any service. The user is still authenticated and the type table still
 *   applies, but one service's credentials can impersonate another: development and tests only.
 * In-process (embedded), the user is the service that enqueued the outbox row, stamped by the
 * composing process itself.
 *
 * `authenticateProducer` is pure: the consumer refuses a delivery with the returned reason.
 */
import { PRODUCING_SERVICES, mayEmit } from '@everdict/contracts';

export interface BrokerIdentity {
  readonly mode: 'per_service' | 'shared' | 'in_process';
  /** Broker user → the services it speaks for. */
  readonly users: ReadonlyMap<string, readonly string[]>;
}

export type ProducerRefusal = 'producer_unauthenticated' | 'producer_unknown' | 'sender_mismatch' | 'type_not_permitted';

/** Shared mode: `user` speaks for every service. */
export function sharedIdentity(user: string): BrokerIdentity {
  return { mode: 'shared', users: new Map([[user, [...PRODUCING_SERVICES]]]) };
}

/** Per-service mode from service → user (one user per service, no user shared by two). */
export function perServiceIdentity(userOf: Readonly<Record<string, string>>): BrokerIdentity {
  const users = new Map<string, string[]>();
  for (const [service, user] of Object.entries(userOf)) users.set(user, [...(users.get(user) ?? []), service]);
  return { mode: 'per_service', users };
}

/** In-process: each service's name is its own user. */
export const IN_PROCESS_IDENTITY: BrokerIdentity = Object.freeze({ mode: 'in_process', users: new Map(PRODUCING_SERVICES.map((s) => [s, [s]])) });

/**
 * Parses `EVERDICT_AMQP_USERS`: `service=user` pairs separated by commas, naming every producing
 * service exactly once. Throws a message naming the offending pair.
 */
export function parseAmqpUsers(raw: string): Record<string, string> {
  const out: Record<string, string> = {};
  const seenUsers = new Set<string>();
  for (const part of raw.split(',').map((p) => p.trim()).filter((p) => p.length > 0)) {
    const eq = part.indexOf('=');
    const service = eq < 0 ? part : part.slice(0, eq).trim();
    const user = eq < 0 ? '' : part.slice(eq + 1).trim();
    if (!(PRODUCING_SERVICES as readonly string[]).includes(service)) throw new Error(`"${service}" is not a service (one of ${PRODUCING_SERVICES.join(', ')})`);
    if (user.length === 0 || !/^[A-Za-z0-9._@-]+$/.test(user)) throw new Error(`the user of ${service} must be letters, digits, . _ @ or -`);
    if (service in out) throw new Error(`${service} is named twice`);
    if (seenUsers.has(user)) throw new Error(`user ${user} is given to two services; each service needs its own`);
    out[service] = user;
    seenUsers.add(user);
  }
  const missing = PRODUCING_SERVICES.filter((s) => !(s in out));
  if (missing.length > 0) throw new Error(`names no user for ${missing.join(', ')}; every node must know every service's user`);
  return out;
}

/**
 * Whether a delivery from broker user `userId` may carry an envelope of `type` claiming
 * `senderService`. Null: it may.
 */
export function authenticateProducer(identity: BrokerIdentity, userId: string | undefined, senderService: string, type: string): { reason: ProducerRefusal; detail: string } | null {
  if (userId === undefined || userId.length === 0) return { reason: 'producer_unauthenticated', detail: 'properties.user-id is missing' };
  const speaksFor = identity.users.get(userId);
  if (!speaksFor) return { reason: 'producer_unknown', detail: 'properties.user-id names no service user' };
  if (!speaksFor.includes(senderService)) return { reason: 'sender_mismatch', detail: `/sender/service ${senderService} is not the authenticated producer (${speaksFor.join(', ')})` };
  if (!mayEmit(senderService, type)) return { reason: 'type_not_permitted', detail: `/type ${type} is not emitted by ${senderService}` };
  return null;
}
