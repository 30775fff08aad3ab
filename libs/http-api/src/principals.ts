/**
 * Bearer tokens → principals (DESIGN §7). The fleet config stores only `sha256:<hex>` of each
 * token; a presented token is hashed and compared with every stored hash in constant time per
 * comparison, so neither the token nor which principal nearly matched leaks through timing.
 */
import { timingSafeEqual } from 'node:crypto';
import { sha256Hex } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';

export interface Principal {
  readonly id: string;
  readonly roles: readonly string[];
  /** Customers whose cases the principal may see; null = all. */
  readonly customers: readonly string[] | null;
}

/** The stored form of a token. */
export function tokenHash(token: string): string {
  return `sha256:${sha256Hex(token)}`;
}

const BEARER = /^Bearer ([\x21-\x7e]{8,512})$/;

export class PrincipalDirectory {
  private readonly entries: readonly { principal: Principal; hash: Buffer }[];

  constructor(principals: FleetConfig['principals'] = {}) {
    this.entries = Object.entries(principals).flatMap(([id, p]) =>
      p ? [{ principal: { id, roles: [...p.roles], customers: p.customers ? [...p.customers] : null }, hash: Buffer.from(p.tokenHash, 'utf8') }] : [],
    );
  }

  /** The configured principal named `id`, or undefined (a web session names its principal by id). */
  byId(id: string): Principal | undefined {
    return this.entries.find((e) => e.principal.id === id)?.principal;
  }

  /** The principal of an `Authorization: Bearer …` header, or undefined. */
  authenticate(authorization: string | undefined): Principal | undefined {
    const m = authorization === undefined ? null : BEARER.exec(authorization.trim());
    if (!m) return undefined;
    const presented = Buffer.from(tokenHash(m[1]!), 'utf8');
    let found: Principal | undefined;
    // Every entry is compared (no early exit), each comparison in constant time.
    for (const e of this.entries) {
      if (e.hash.length === presented.length && timingSafeEqual(e.hash, presented) && found === undefined) found = e.principal;
    }
    return found;
  }
}

/** Whether the principal may see a case of `customer`. */
export function seesCustomer(p: Principal, customer: string): boolean {
  return p.customers === null || p.customers.includes(customer);
}
