/**
 * Which broker login each service of a node uses (pure: environment in, plan or problems out).
 *
 * - `EVERDICT_AMQP_USERS` unset: shared — every service uses AMQP_URL's user, which then speaks
 *   for any service (BrokerIdentity 'shared'). For development and tests; compose and any
 *   production fleet set EVERDICT_AMQP_USERS.
 * - `EVERDICT_AMQP_USERS=intake=u1,turn-worker=u2,…` (every service, the same value on every
 *   node): per service — each service of this node logs in as its own user, with the password
 *   `EVERDICT_AMQP_PASSWORD_<SERVICE>` (e.g. EVERDICT_AMQP_PASSWORD_TURN_WORKER; or the file
 *   `…_FILE` names), on the host(s) of AMQP_URL. When AMQP_URL itself logs in as that service's
 *   user, its password is used and no extra variable is needed (a single-service container).
 */
import type { BrokerIdentity } from './identity.js';
import { parseAmqpUsers, perServiceIdentity } from './identity.js';
import { brokerUrls } from './amqp.js';

type Env = Readonly<Record<string, string | undefined>>;

export type BrokerLogin = { readonly mode: 'shared'; readonly url: string } | { readonly mode: 'per_service'; readonly identity: BrokerIdentity; readonly urls: Readonly<Record<string, string>> };

export const AMQP_USERS_ENV = 'EVERDICT_AMQP_USERS';

/** The password variable of `service`: EVERDICT_AMQP_PASSWORD_TURN_WORKER for turn-worker. */
export function amqpPasswordEnv(service: string): string {
  return `EVERDICT_AMQP_PASSWORD_${service.toUpperCase().replaceAll('-', '_')}`;
}

/** `url` (each node of a comma-separated list) logged in as user:password. */
function withLogin(url: string, user: string, password: string): string {
  return brokerUrls(url)
    .map((u) => {
      const parsed = new URL(u);
      parsed.username = encodeURIComponent(user);
      parsed.password = encodeURIComponent(password);
      return parsed.toString();
    })
    .join(',');
}

/** The login plan of a node running `services`; every problem names its variable. */
export function brokerLogin(env: Env, amqpUrl: string, services: readonly string[]): { login?: BrokerLogin; problems: { name: string; reason: string }[] } {
  const raw = env[AMQP_USERS_ENV]?.trim() ?? '';
  if (raw === '') return { login: { mode: 'shared', url: amqpUrl }, problems: [] };
  let userOf: Record<string, string>;
  try {
    userOf = parseAmqpUsers(raw);
  } catch (err) {
    return { problems: [{ name: AMQP_USERS_ENV, reason: err instanceof Error ? err.message : String(err) }] };
  }
  const problems: { name: string; reason: string }[] = [];
  const urls: Record<string, string> = {};
  let urlUser: string | undefined;
  let urlPassword: string;
  try {
    const first = new URL(brokerUrls(amqpUrl)[0]!);
    urlUser = first.username === '' ? undefined : decodeURIComponent(first.username);
    urlPassword = decodeURIComponent(first.password);
  } catch {
    return { problems: [{ name: 'AMQP_URL', reason: 'is not a valid amqp:// or amqps:// URL' }] };
  }
  for (const service of services) {
    const user = userOf[service]!;
    const variable = amqpPasswordEnv(service);
    const password = env[variable] ?? (urlUser === user && urlPassword !== '' ? urlPassword : undefined);
    if (password === undefined || password === '') {
      problems.push({ name: variable, reason: `is required: ${service} logs in to the broker as ${user} (${AMQP_USERS_ENV}); set it or ${variable}_FILE` });
      continue;
    }
    urls[service] = withLogin(amqpUrl, user, password);
  }
  if (problems.length > 0) return { problems };
  return { login: { mode: 'per_service', identity: perServiceIdentity(userOf), urls }, problems };
}
