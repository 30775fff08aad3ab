/**
 * Verified read-only reads against a REAL target database (its own fresh database): statement
 * verification refuses before any contact, and the READ ONLY transaction, the statement timeout
 * and the read role each hold on their own on the target.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EverdictError } from '@everdict/contracts';
import type { PgPoolPort, PostgresEstateConfig } from '@everdict/connectors';
import { ConnectorRefused, ConnectorUnavailable, PostgresEstateConnector, estatePool } from '@everdict/connectors';
import { freshDatabase } from '@everdict/testkit';
import { ctx } from './fixtures.js';
import { countingPool } from './countingPool.js';
import type { CountedPool } from './countingPool.js';

/** Statements that are not reads, each with what the refusal must name. */
const NOT_READS: [string, string, RegExp][] = [
  ['sequence', "SELECT nextval('order_ids') AS id", /calls function nextval/],
  ['advisory lock', 'SELECT pg_advisory_lock(42)', /calls function pg_advisory_lock/],
  ['user function that inserts', 'SELECT note_and_count() AS n', /calls function note_and_count/],
  ['row locks', 'SELECT * FROM accounts FOR UPDATE', /locking clause/],
  ['data-modifying CTE', 'WITH x AS (DELETE FROM accounts RETURNING *) SELECT * FROM x', /every CTE must be a SELECT/],
  ['two statements', 'SELECT 1; DELETE FROM accounts', /statement/],
  ['relation outside the list', 'SELECT * FROM secrets', /reads relation secrets/],
  ['SELECT INTO', 'SELECT * INTO accounts_copy FROM accounts', /INTO/],
];

const base: PostgresEstateConfig = {
  name: 'shopdb',
  target: { system: 'shop', environment: 'test' },
  relations: ['accounts', 'orders'],
  templates: [
    {
      name: 'regions.summary',
      kind: 'read',
      sql: `SELECT a.region, count(DISTINCT a.id)::int AS accounts, coalesce(sum(o.total), 0)::int AS total, upper(min(a.id)) AS first
              FROM accounts a LEFT JOIN orders o ON o.account_id = a.id
             WHERE a.region = :region GROUP BY a.region`,
      params: { region: { type: 'string', enum: ['eu', 'us'] } },
    },
    { name: 'orders.all', kind: 'read', sql: 'SELECT id FROM orders ORDER BY id', params: {} },
  ],
  select: { relations: ['accounts', 'orders'], maxRows: 5 },
};

type Counted = CountedPool;


/** A pool that must never be asked for a client. */
function untouchablePool(): { port: PgPoolPort; asked: () => number } {
  let asked = 0;
  return {
    asked: () => asked,
    port: {
      connect: () => {
        asked++;
        return Promise.reject(new Error('contacted'));
      },
      end: () => Promise.resolve(),
    },
  };
}

type Db = Awaited<ReturnType<typeof freshDatabase>>;
let db: Db;
let admin: pg.Client;
let counted: Counted;
let connector: PostgresEstateConnector;
const others: PostgresEstateConnector[] = [];
// Roles are cluster-wide: the name is unique to this run and the role is dropped afterwards.
const readRole = `ev_reader_${process.pid}_${randomBytes(3).toString('hex')}`;

function open(config: PostgresEstateConfig): PostgresEstateConnector {
  const c = new PostgresEstateConnector(config, estatePool(db.url, { max: 2 }));
  others.push(c);
  return c;
}

async function failure(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => undefined,
    (e: unknown) => e,
  );
}

/** What a refused read could otherwise have changed. */
async function estateState(): Promise<unknown> {
  const q = async (sql: string) => (await admin.query(sql)).rows;
  return {
    accounts: await q('SELECT id, region FROM accounts ORDER BY id'),
    notes: await q('SELECT count(*)::int AS n FROM secrets'),
    sequence: await q('SELECT last_value, is_called FROM order_ids'),
    // pg_locks is the whole cluster's: only this target's database counts (other suites' migrations take advisory locks in theirs).
    advisoryLocks: await q("SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"),
    copies: await q("SELECT count(*)::int AS n FROM pg_class WHERE relname = 'accounts_copy'"),
  };
}

beforeAll(async () => {
  db = await freshDatabase('connectors_reads');
  admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  await admin.query(`
    CREATE TABLE accounts (id text PRIMARY KEY, region text NOT NULL);
    CREATE TABLE orders (id int PRIMARY KEY, account_id text NOT NULL REFERENCES accounts, total int NOT NULL);
    CREATE TABLE secrets (id serial PRIMARY KEY, note text NOT NULL);
    CREATE SEQUENCE order_ids;
    INSERT INTO accounts VALUES ('a1', 'eu'), ('a2', 'eu'), ('a3', 'us');
    INSERT INTO orders VALUES (1, 'a1', 10), (2, 'a1', 5), (3, 'a2', 7), (4, 'a3', 1);
    INSERT INTO secrets (note) VALUES ('s1');
    CREATE FUNCTION note_and_count() RETURNS int LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO secrets (note) VALUES ('written by a read'); RETURN (SELECT count(*) FROM secrets); END $$;
    CREATE ROLE ${readRole} NOLOGIN;
    GRANT SELECT ON accounts TO ${readRole};
    GRANT ${readRole} TO CURRENT_USER;
  `);
  counted = countingPool(estatePool(db.url, { max: 2 }));
  connector = new PostgresEstateConnector(base, counted.port);
});

afterAll(async () => {
  for (const c of others) await c.close();
  await connector?.close();
  if (admin !== undefined) {
    await admin.query(`DROP OWNED BY ${readRole}; DROP ROLE IF EXISTS ${readRole}`).catch(() => undefined);
    await admin.end();
  }
});

describe('verified read-only reads on a real target', () => {
  it.each(NOT_READS)('refuses a read template that is not a read (%s) when the connector is reviewed, before any contact', (_label, sql, why) => {
    const pool = untouchablePool();
    let caught: unknown;
    try {
      new PostgresEstateConnector({ ...base, templates: [...base.templates, { name: 'bad', kind: 'read', sql, params: {} }] }, pool.port);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(EverdictError);
    expect(caught).toMatchObject({ code: 'invalid_connector_config' });
    const problems = (caught as EverdictError).details['problems'] as string[];
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^template "bad": /);
    expect(problems[0]).toMatch(why);
    expect(pool.asked()).toBe(0);
  });

  it('refuses each of them as sql.select per call, before a connection is checked out, and nothing changes', async () => {
    const before = await estateState();
    const connects = counted.connects();
    const queries = counted.queries();
    for (const [label, query, why] of NOT_READS) {
      const err = await failure(connector.read('sql.select', { query }, ctx));
      expect(err, label).toBeInstanceOf(ConnectorRefused);
      expect(err, label).toMatchObject({ reason: 'unverified_read', violations: [{ path: '/params/query', message: expect.stringMatching(why) }] });
    }
    // Admission refuses before verification: no query, an overlong query, an undeclared parameter.
    for (const params of [{}, { query: 'SELECT 1'.padEnd(10_001, ' ') }, { query: 'SELECT 1', extra: 'x' }]) {
      expect(await failure(connector.read('sql.select', params, ctx))).toMatchObject({ reason: 'invalid_params' });
    }
    expect(counted.connects()).toBe(connects);
    expect(counted.queries()).toBe(queries);
    expect(await estateState()).toEqual(before);
  });

  it('answers a verified join with aggregates, as a template and as sql.select', async () => {
    expect((await connector.read('regions.summary', { region: 'eu' }, ctx)).value).toEqual({
      rowCount: 1,
      rows: [{ region: 'eu', accounts: 2, total: 22, first: 'A1' }],
    });
    const adHoc = await connector.read(
      'sql.select',
      {
        query: `WITH per_account AS (SELECT account_id, sum(total) AS spent, count(*) AS n FROM orders GROUP BY account_id)
                SELECT a.id, lower(a.region) AS region, coalesce(p.spent, 0)::int AS spent, rank() OVER (ORDER BY p.spent DESC)::int AS place
                  FROM accounts a LEFT JOIN per_account p ON p.account_id = a.id
                 WHERE a.id IN (SELECT account_id FROM orders)
                 ORDER BY place;`,
      },
      ctx,
    );
    expect(adHoc.value).toEqual({
      rowCount: 3,
      rows: [
        { id: 'a1', region: 'eu', spent: 15, place: 1 },
        { id: 'a2', region: 'eu', spent: 7, place: 2 },
        { id: 'a3', region: 'us', spent: 1, place: 3 },
      ],
    });
    expect(connector.describe().readOperations.map((r) => r.name)).toEqual(['regions.summary', 'orders.all', 'sql.select']);
  });

  it('bounds an ad-hoc read by maxRows: more rows than that is read_too_large, never a partial answer', async () => {
    await expect(connector.read('sql.select', { query: 'SELECT o.id FROM orders o, accounts a' }, ctx)).rejects.toMatchObject({ code: 'read_too_large' });
    expect((await connector.read('sql.select', { query: 'SELECT id FROM orders ORDER BY id LIMIT 5' }, ctx)).value).toMatchObject({ rowCount: 4 });
  });

  it('runs every read as readRole: the database refuses what the role may not select', async () => {
    const asReader = open({ ...base, name: 'shopdb-reader', readRole });
    expect((await asReader.read('sql.select', { query: 'SELECT count(*)::int AS n FROM accounts' }, ctx)).value).toEqual({ rowCount: 1, rows: [{ n: 3 }] });
    for (const [operation, params] of [
      ['sql.select', { query: 'SELECT * FROM orders' }],
      ['orders.all', {}],
    ] as const) {
      const err = await failure(asReader.read(operation, params, ctx));
      expect(err, operation).not.toBeInstanceOf(ConnectorRefused); // verified, then refused by the target
      expect(err, operation).toMatchObject({ code: 'read_failed', details: { sqlState: '42501' } });
    }
    // The same reads as the connecting user succeed: the denial is the role's, not the verifier's.
    expect((await connector.read('orders.all', {}, ctx)).value).toMatchObject({ rowCount: 4 });
  });

  it('keeps the READ ONLY transaction as its own control: an allowed function that writes is stopped by the database', async () => {
    const before = await estateState();
    const trusting = open({
      ...base,
      name: 'shopdb-trusting',
      allowedFunctions: ['note_and_count'],
      templates: [{ name: 'notes.count', kind: 'read', sql: 'SELECT note_and_count() AS n', params: {} }],
      select: { relations: ['accounts'], allowedFunctions: ['note_and_count'] },
    });
    for (const [operation, params] of [
      ['notes.count', {}],
      ['sql.select', { query: 'SELECT note_and_count() AS n' }],
    ] as const) {
      expect(await failure(trusting.read(operation, params, ctx)), operation).toMatchObject({ code: 'read_failed', details: { sqlState: '25006' } });
    }
    expect(await estateState()).toEqual(before);
  });

  it('does not let an ad-hoc read use the template extensions', async () => {
    const c = open({ ...base, name: 'shopdb-split', allowedFunctions: ['note_and_count'], templates: [] });
    expect(await failure(c.read('sql.select', { query: 'SELECT note_and_count()' }, ctx))).toMatchObject({ reason: 'unverified_read' });
  });

  it('ends a read whose plan is slow at the statement timeout', async () => {
    const slow = open({
      ...base,
      name: 'shopdb-slow',
      statementTimeoutMs: 200,
      templates: [{ name: 'slow.count', kind: 'read', sql: 'SELECT count(*) AS n FROM generate_series(1, 100000) a, generate_series(1, 100000) b', params: {} }],
    });
    const started = performance.now();
    const err = await failure(slow.read('slow.count', {}, ctx));
    expect(err).toBeInstanceOf(ConnectorUnavailable);
    expect(err).toMatchObject({ details: { what: 'SQLSTATE 57014', answered: true } });
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});
