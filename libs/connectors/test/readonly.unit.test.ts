/**
 * The read-only verifier on many statement shapes. Each row is parsed by the real Postgres
 * parser; the expectation is accepted (undefined) or a pattern the refusal must match.
 */
import { describe, expect, it } from 'vitest';
import { EverdictError } from '@everdict/contracts';
import { readOnlyProblem, readPolicy, reviewPostgresConfig } from '@everdict/connectors';

const open = readPolicy({ parameters: true });
const scoped = readPolicy({ relations: ['accounts', 'orders', 'ledger.entries'], functions: ['ledger.balance_of', 'pg_catalog.md5'], parameters: true });
const adHoc = readPolicy({ relations: ['accounts', 'orders'], parameters: false });

const accepted: [string, string][] = [
  ['plain select', 'SELECT id, balance FROM accounts WHERE id = $1::text'],
  ['no FROM', 'SELECT 1'],
  ['VALUES', 'VALUES (1, 2), (3, 4)'],
  ['TABLE', 'TABLE accounts'],
  ['join with aggregates', 'SELECT a.region, count(*), sum(o.total), max(o.total), avg(o.total) FROM accounts a JOIN orders o ON o.account_id = a.id GROUP BY a.region HAVING count(*) > 1 ORDER BY 2 DESC LIMIT 10 OFFSET 1'],
  ['left join, using', 'SELECT * FROM accounts LEFT JOIN orders USING (id)'],
  ['nested subqueries', 'SELECT * FROM (SELECT id FROM (SELECT id FROM accounts) x WHERE id IN (SELECT account_id FROM orders WHERE total > (SELECT min(total) FROM orders))) y'],
  ['EXISTS and ANY sublinks', 'SELECT id FROM accounts a WHERE EXISTS (SELECT 1 FROM orders o WHERE o.account_id = a.id) AND a.id = ANY (SELECT account_id FROM orders)'],
  ['lateral subquery', 'SELECT a.id, l.n FROM accounts a, LATERAL (SELECT count(*) AS n FROM orders o WHERE o.account_id = a.id) l'],
  ['window functions', 'SELECT id, row_number() OVER (PARTITION BY region ORDER BY balance DESC), sum(balance) OVER w, lag(balance) OVER w FROM accounts WINDOW w AS (ORDER BY id)'],
  ['CASE, COALESCE, NULLIF, GREATEST', "SELECT CASE WHEN balance > 0 THEN 'credit' WHEN balance < 0 THEN 'debit' ELSE 'zero' END, coalesce(region, 'none'), nullif(balance, 0), greatest(1, balance), least(2, balance) FROM accounts"],
  ['casts', "SELECT balance::text, CAST(balance AS numeric(12, 2)), '2026-01-01'::date, interval '1 day', id::varchar(10), ARRAY[1, 2]::int8[], '{}'::jsonb FROM accounts"],
  ['SQL-syntax functions', "SELECT extract(year FROM now()), substring(id FROM 1 FOR 2), trim(both FROM id), position('a' IN id), now() AT TIME ZONE 'UTC', overlay(id PLACING 'x' FROM 1) FROM accounts"],
  ['operators and predicates', "SELECT * FROM accounts WHERE id LIKE 'a%' AND id NOT ILIKE 'b%' AND balance BETWEEN 1 AND 9 AND region IS NOT NULL AND (balance > 0) IS TRUE AND id IS DISTINCT FROM 'x' AND balance % 2 = 0 OR NOT region IN ('eu', 'us')"],
  ['json operators and builders', "SELECT jsonb_build_object('id', id, 'bal', balance), json_agg(id), '{\"a\":1}'::jsonb ->> 'a', '{\"a\":1}'::jsonb @> '{}'::jsonb FROM accounts GROUP BY id, balance"],
  ['aggregate FILTER and WITHIN GROUP', 'SELECT count(*) FILTER (WHERE balance > 0), percentile_cont(0.5) WITHIN GROUP (ORDER BY balance), string_agg(id, \',\' ORDER BY id) FROM accounts'],
  ['WITH of SELECTs', 'WITH big AS (SELECT * FROM accounts WHERE balance > 100), eu AS (SELECT * FROM big WHERE region = $1::text) SELECT count(*) FROM eu'],
  ['recursive WITH', 'WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10) SELECT sum(i) FROM n'],
  ['set operations', 'SELECT id FROM accounts UNION SELECT account_id FROM orders EXCEPT SELECT id FROM accounts WHERE balance = 0'],
  ['function in FROM (allowed)', 'SELECT * FROM generate_series(1, 3) AS g(i)'],
  ['pg_catalog-qualified built-in', 'SELECT pg_catalog.lower(id), pg_catalog.count(*) FROM accounts GROUP BY id'],
  ['pg_catalog operator', 'SELECT balance OPERATOR(pg_catalog.+) 1 FROM accounts'],
  ['DISTINCT ON, ROLLUP, GROUPING', 'SELECT DISTINCT ON (region) region, grouping(region) FROM accounts GROUP BY ROLLUP (region)'],
  ['row values, arrays, indirection', "SELECT ROW(1, 2), (ARRAY[1, 2])[1], (ARRAY['a'])[1:1], current_date, current_user FROM accounts"],
  ['collation and sort operator', 'SELECT id FROM accounts ORDER BY id COLLATE "C" USING <'],
  ['trailing semicolon and comments', 'SELECT 1 /* fine */ -- also fine\n;'],
  ['a deep but bounded expression', `SELECT 1${'+1'.repeat(200)}`],
];

const refusedOpen: [string, string, RegExp][] = [
  ['empty', '  ', /does not parse/],
  ['only a semicolon', ';', /is empty/],
  ['syntax error', 'SELEC 1', /does not parse/],
  ['two statements', 'SELECT 1; DELETE FROM t', /2 statements/],
  ['INSERT', "INSERT INTO t VALUES (1)", /is INSERT, not a SELECT/],
  ['UPDATE', 'UPDATE t SET a = 1', /is UPDATE, not a SELECT/],
  ['DDL', 'DROP TABLE t', /is DropStmt, not a SELECT/],
  ['SET', "SET search_path = 'x'", /not a SELECT/],
  ['EXPLAIN ANALYZE', 'EXPLAIN ANALYZE DELETE FROM t', /not a SELECT/],
  ['nextval', "SELECT nextval('s')", /calls function nextval/],
  ['setval', "SELECT setval('s', 1)", /calls function setval/],
  ['advisory lock', 'SELECT pg_advisory_lock(1)', /calls function pg_advisory_lock/],
  ['pg_sleep', 'SELECT pg_sleep(10)', /calls function pg_sleep/],
  ['set_config', "SELECT set_config('role', 'x', false)", /calls function set_config/],
  ['dblink', "SELECT * FROM dblink('x', 'DELETE FROM t') AS d(a int)", /calls function dblink/],
  ['lo_import', "SELECT lo_import('/etc/passwd')", /calls function lo_import/],
  ['user function', 'SELECT audit_and_return(1)', /calls function audit_and_return/],
  ['user function in FROM', 'SELECT * FROM f()', /calls function f,/],
  ['schema-qualified user function', 'SELECT public.lower(id) FROM accounts', /calls function public.lower/],
  ['function hidden in a nested subquery', 'SELECT * FROM (SELECT (SELECT nextval(\'s\')) AS n) x', /calls function nextval/],
  ['function hidden in a window', 'SELECT sum(1) OVER (ORDER BY nextval(\'s\'))', /calls function nextval/],
  ['function hidden in CASE', "SELECT CASE WHEN true THEN pg_advisory_lock(1) END", /calls function pg_advisory_lock/],
  ['function hidden in a lateral', 'SELECT * FROM accounts a, LATERAL (SELECT pg_advisory_xact_lock(1)) l', /calls function pg_advisory_xact_lock/],
  ['function hidden in ORDER BY', 'SELECT id FROM accounts ORDER BY txid_current()', /calls function txid_current/],
  ['function hidden in a CTE', 'WITH x AS (SELECT nextval(\'s\')) SELECT * FROM x', /calls function nextval/],
  ['FOR UPDATE', 'SELECT * FROM accounts FOR UPDATE', /locking clause/],
  ['FOR SHARE in a subquery', 'SELECT * FROM (SELECT * FROM accounts FOR SHARE) x', /locking clause/],
  ['FOR NO KEY UPDATE', 'SELECT * FROM accounts FOR NO KEY UPDATE SKIP LOCKED', /locking clause/],
  ['FOR KEY SHARE', 'SELECT * FROM accounts FOR KEY SHARE', /locking clause/],
  ['SELECT INTO', 'SELECT * INTO copy FROM accounts', /INTO/],
  ['CTE with DELETE', 'WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x', /WITH x AS \(DELETE …\): every CTE must be a SELECT/],
  ['CTE with INSERT', 'WITH x AS (INSERT INTO t VALUES (1) RETURNING *) SELECT 1', /INSERT/],
  ['CTE with UPDATE nested in a subquery', 'SELECT * FROM (WITH x AS (UPDATE t SET a = 1 RETURNING *) SELECT * FROM x) y', /UPDATE/],
  ['cast to a user type', "SELECT 'x'::mood", /casts to type mood/],
  ['cast to regclass', "SELECT 'accounts'::regclass", /casts to type regclass/],
  ['user operator', 'SELECT 1 === 2', /operator ===/],
  ['schema-qualified operator', 'SELECT 1 OPERATOR(public.+) 2', /operator public\.\+/],
  ['TABLESAMPLE', 'SELECT * FROM accounts TABLESAMPLE SYSTEM (10)', /RangeTableSample/],
  ['XMLTABLE', "SELECT * FROM XMLTABLE('/a' PASSING '<a/>' COLUMNS x int)", /RangeTableFunc/],
  ['column definition list', 'SELECT * FROM generate_series(1, 2) AS g(i int)', /ColumnDef/],
  ['cross-database name', 'SELECT * FROM otherdb.public.accounts', /database-qualified/],
  ['a tree deeper than the verifier follows', `SELECT 1${'+1'.repeat(600)}`, /nested too deeply/],
];

const refusedScoped: [string, string, RegExp][] = [
  ['relation outside the list', 'SELECT * FROM secrets', /reads relation secrets/],
  ['relation outside the list in a join', 'SELECT * FROM accounts JOIN secrets ON true', /reads relation secrets/],
  ['relation outside the list in a sublink', 'SELECT (SELECT count(*) FROM secrets) FROM accounts', /reads relation secrets/],
  ['catalog relation', 'SELECT * FROM pg_catalog.pg_authid', /reads relation pg_catalog\.pg_authid/],
  ['qualified name not declared qualified', 'SELECT * FROM public.accounts', /reads relation public\.accounts/],
  ['unqualified name declared qualified', 'SELECT * FROM entries', /reads relation entries/],
  // A non-recursive CTE sees only earlier CTEs; a later name inside it is a real relation.
  ['forward reference to a CTE name', 'WITH a AS (SELECT * FROM secrets), secrets AS (SELECT 1) SELECT * FROM a', /reads relation secrets/],
  // A CTE name is in scope only inside its own statement.
  ['CTE name used outside its scope', 'SELECT * FROM secrets, (WITH secrets AS (SELECT 1) SELECT * FROM secrets) s', /reads relation secrets/],
  ['qualified name never matches a CTE', 'WITH secrets AS (SELECT 1) SELECT * FROM public.secrets', /reads relation public\.secrets/],
  ['extension is schema-exact', 'SELECT other.balance_of(1)', /calls function other\.balance_of/],
];

const acceptedScoped: [string, string][] = [
  ['qualified relation declared qualified', 'SELECT * FROM ledger.entries'],
  ['CTE names shadow unqualified relations in scope', 'WITH secrets AS (SELECT * FROM accounts) SELECT * FROM secrets'],
  ['recursive CTE refers to itself', 'WITH RECURSIVE secrets(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM secrets WHERE i < 3) SELECT * FROM secrets'],
  ['extension function, schema-qualified', 'SELECT ledger.balance_of(1)'],
  ['extension written with pg_catalog resolves to the bare name', 'SELECT md5(id) FROM accounts'],
];

describe('read-only verification', () => {
  it.each(accepted)('accepts %s', (_label, sql) => {
    expect(readOnlyProblem(sql, open)).toBeUndefined();
  });

  it.each(refusedOpen)('refuses %s', (_label, sql, why) => {
    expect(readOnlyProblem(sql, open)).toMatch(why);
  });

  it.each(refusedScoped)('with a relation list, refuses %s', (_label, sql, why) => {
    expect(readOnlyProblem(sql, scoped)).toMatch(why);
  });

  it.each(acceptedScoped)('with a relation list, accepts %s', (_label, sql) => {
    expect(readOnlyProblem(sql, scoped)).toBeUndefined();
  });

  it('refuses bind parameters where nothing can bind them', () => {
    expect(readOnlyProblem('SELECT * FROM accounts WHERE id = $1', adHoc)).toMatch(/bind parameter/);
    expect(readOnlyProblem('SELECT * FROM accounts', adHoc)).toBeUndefined();
  });

  it('refuses a read template at review, naming why, and a bad policy name', () => {
    let caught: unknown;
    try {
      reviewPostgresConfig({
        name: 'estate',
        target: { system: 'db', environment: 'test' },
        relations: ['accounts'],
        templates: [
          { name: 'ok', kind: 'read', sql: 'SELECT lower(id) FROM accounts WHERE id = :id', params: { id: { type: 'string' } } },
          { name: 'seq', kind: 'read', sql: "SELECT nextval('s')", params: {} },
          { name: 'other', kind: 'read', sql: 'SELECT * FROM secrets', params: {} },
          { name: 'lock', kind: 'read', sql: 'SELECT * FROM accounts WHERE id = :id FOR UPDATE', params: { id: { type: 'string' } } },
          // Mutations are reviewed templates executed under a gate; relations do not bound them.
          { name: 'w', kind: 'mutate', effectClass: 'dml', sql: 'UPDATE secrets SET a = :a', params: { a: { type: 'integer' } } },
        ],
        select: { relations: [] },
        readRole: 'Bad Role',
      });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(EverdictError);
    const problems = (caught as EverdictError).details['problems'] as string[];
    expect(problems).toEqual([
      'readRole must be a plain lower-case role name',
      'select.relations must name at least one relation',
      'template "seq": not a verified read: calls function nextval, which is not in the allowed functions',
      'template "other": not a verified read: reads relation secrets, which is not in the allowed relations',
      'template "lock": not a verified read: has a locking clause (FOR UPDATE / FOR SHARE …), which takes row locks',
    ]);
  });

  it('registers sql.select only when select is configured', () => {
    const base = { name: 'estate', target: { system: 'db', environment: 'test' }, templates: [] };
    expect(reviewPostgresConfig(base).select).toBeUndefined();
    expect(reviewPostgresConfig({ ...base, select: { relations: ['accounts'], maxRows: 5 } }).select?.maxRows).toBe(5);
    expect(() => reviewPostgresConfig({ ...base, templates: [{ name: 'sql.select', kind: 'read', sql: 'SELECT 1', params: {} }] })).toThrow(/ad-hoc read/);
  });
});
