/**
 * Verifying that a read is read-only (seed 004 §2.2): the statement is parsed by the real
 * Postgres parser (libpg-query, the server's own grammar compiled to WASM) and its syntax tree
 * is checked against a closed SELECT subset. Nothing is judged from the SQL text.
 *
 * A statement passes only when:
 * - it is exactly one statement, a SelectStmt (VALUES and set operations included);
 * - every CTE is itself a SELECT — a data-modifying WITH (INSERT/UPDATE/DELETE/MERGE) is refused;
 * - no SELECT anywhere in it has a locking clause (FOR UPDATE/SHARE/…) or an INTO clause;
 * - every function call names a function of the built-in side-effect-free set or of the
 *   policy's extension (`pg_catalog.` qualified names resolve to the built-ins) — SELECT can
 *   otherwise call nextval, pg_advisory_lock, dblink or a user function that writes;
 * - every operator is a built-in operator symbol, every cast names a built-in scalar type
 *   (a cast to a user type may run a user function);
 * - every relation it reads is in the policy's relations, when the policy names them (a CTE
 *   name shadows only unqualified references within the CTE's scope, as in Postgres);
 * - every syntax-tree node is of a kind this module knows: anything else fails closed.
 *
 * What the tree cannot show — a view's definition; a function reached through a column of a
 * user type (its operators, a user overload of an allowed name) or attribute notation (`t.f`
 * meaning `f(t)`); an allowed name shadowed by a schema placed before pg_catalog in the
 * search_path; row-level security — is bounded by the separate controls every read also runs
 * under: a READ ONLY transaction, a statement timeout and, when configured, a read role whose
 * database privileges are the last word.
 */
import { loadModule, parseSync } from 'libpg-query';

// parseSync needs the WASM module instantiated; loading it once when this module is imported
// keeps config review synchronous (a connector is reviewed in its constructor).
await loadModule();

/**
 * Built-in functions that only compute a value from their arguments and the clock: no write,
 * no lock, no sequence, no session state, no I/O outside the statement. Names as pg_catalog
 * spells them (the parser turns `trim(…)` into btrim, `x AT TIME ZONE z` into timezone, …).
 */
export const DEFAULT_READ_FUNCTIONS: readonly string[] = [
  // aggregates
  'count', 'sum', 'min', 'max', 'avg', 'array_agg', 'string_agg', 'bool_and', 'bool_or', 'every',
  'json_agg', 'jsonb_agg', 'json_object_agg', 'jsonb_object_agg', 'stddev', 'stddev_pop', 'stddev_samp',
  'variance', 'var_pop', 'var_samp', 'percentile_cont', 'percentile_disc', 'mode',
  // window functions
  'row_number', 'rank', 'dense_rank', 'percent_rank', 'cume_dist', 'ntile', 'lag', 'lead',
  'first_value', 'last_value', 'nth_value',
  // strings
  'lower', 'upper', 'initcap', 'length', 'char_length', 'character_length', 'octet_length',
  'substring', 'substr', 'btrim', 'ltrim', 'rtrim', 'concat', 'concat_ws', 'replace', 'split_part',
  'left', 'right', 'lpad', 'rpad', 'strpos', 'position', 'starts_with', 'reverse', 'repeat',
  'translate', 'overlay', 'format', 'md5', 'like_escape', 'similar_to_escape', 'regexp_replace',
  'regexp_match', 'normalize', 'is_normalized',
  // numbers
  'abs', 'round', 'trunc', 'floor', 'ceil', 'ceiling', 'mod', 'div', 'power', 'sqrt', 'sign', 'exp', 'ln', 'log',
  // dates and times
  'now', 'statement_timestamp', 'transaction_timestamp', 'clock_timestamp', 'date_trunc', 'date_part',
  'date_bin', 'extract', 'age', 'timezone', 'make_date', 'make_time', 'make_timestamp',
  'make_timestamptz', 'make_interval', 'to_char', 'to_date', 'to_timestamp', 'to_number', 'isfinite',
  'justify_days', 'justify_hours', 'justify_interval',
  // json
  'json_build_object', 'jsonb_build_object', 'json_build_array', 'jsonb_build_array', 'to_json', 'to_jsonb',
  'row_to_json', 'json_array_length', 'jsonb_array_length', 'json_typeof', 'jsonb_typeof',
  'json_extract_path', 'json_extract_path_text', 'jsonb_extract_path', 'jsonb_extract_path_text',
  'jsonb_strip_nulls', 'jsonb_array_elements', 'jsonb_array_elements_text', 'jsonb_each', 'jsonb_each_text',
  'jsonb_object_keys',
  // arrays and sets
  'array_length', 'cardinality', 'unnest', 'array_position', 'array_to_string', 'string_to_array',
  'generate_series', 'num_nulls', 'num_nonnulls',
];

/** Types a cast may name: built-in scalars whose input and cast functions are pure. */
const READ_TYPES = new Set([
  'bool', 'int2', 'int4', 'int8', 'float4', 'float8', 'numeric', 'text', 'varchar', 'bpchar', 'uuid',
  'date', 'time', 'timetz', 'timestamp', 'timestamptz', 'interval', 'json', 'jsonb', 'bytea',
]);

/** Built-in operator symbols (and the words the parser records for BETWEEN forms). */
const READ_OPERATORS = new Set([
  '=', '<>', '!=', '<', '>', '<=', '>=', '+', '-', '*', '/', '%', '^', '|/', '||/', '@', '&', '|', '#',
  '~', '<<', '>>', '||', '~~', '!~~', '~~*', '!~~*', '!~', '~*', '!~*', '->', '->>', '#>', '#>>', '#-',
  '@>', '<@', '?', '?|', '?&', '&&', '@?', '@@',
  'BETWEEN', 'NOT BETWEEN', 'BETWEEN SYMMETRIC', 'NOT BETWEEN SYMMETRIC',
]);

/** Node kinds of the SELECT subset. Any other node anywhere in the tree refuses the statement. */
const READ_NODES = new Set([
  'SelectStmt', 'ResTarget', 'ColumnRef', 'A_Star', 'String', 'Integer', 'Float', 'Boolean', 'A_Const',
  'ParamRef', 'A_Expr', 'BoolExpr', 'NullTest', 'BooleanTest', 'CaseExpr', 'CaseWhen', 'CoalesceExpr',
  'MinMaxExpr', 'SubLink', 'TypeCast', 'FuncCall', 'NamedArgExpr', 'RangeVar', 'RangeSubselect',
  'RangeFunction', 'JoinExpr', 'SortBy', 'WindowDef', 'CommonTableExpr', 'List', 'A_Indirection',
  'A_Indices', 'A_ArrayExpr', 'RowExpr', 'CollateClause', 'SQLValueFunction', 'GroupingSet', 'GroupingFunc',
]);

const STATEMENT_WORDS: Readonly<Record<string, string>> = {
  InsertStmt: 'INSERT',
  UpdateStmt: 'UPDATE',
  DeleteStmt: 'DELETE',
  MergeStmt: 'MERGE',
  SelectStmt: 'SELECT',
};

/** A plain identifier, optionally schema-qualified: how functions and relations are declared. */
const QUALIFIED_NAME = /^[a-z_][a-z0-9_$]{0,62}(\.[a-z_][a-z0-9_$]{0,62})?$/;

/** What a read may use beyond the closed subset. */
export interface ReadPolicy {
  /** Function names, "name" or "schema.name", on top of DEFAULT_READ_FUNCTIONS. */
  readonly functions: ReadonlySet<string>;
  /** Relations ("name" or "schema.name") the read may reference; undefined = not restricted here. */
  readonly relations?: ReadonlySet<string>;
  /** Whether bind parameters ($1 …) may appear: reviewed templates bind them, ad-hoc reads have none. */
  readonly parameters: boolean;
}

/** Problems with the names a connector declares for a policy (config review). */
export function policyNameProblems(field: string, names: readonly string[] | undefined): string[] {
  if (names === undefined) return [];
  if (!Array.isArray(names)) return [`${field} must be an array of names`];
  return names.filter((n) => typeof n !== 'string' || !QUALIFIED_NAME.test(n)).map((n) => `${field}: ${JSON.stringify(n)} is not a plain lower-case (optionally schema-qualified) name`);
}

export function readPolicy(opts: { functions?: readonly string[]; relations?: readonly string[]; parameters: boolean }): ReadPolicy {
  const functions = new Set(DEFAULT_READ_FUNCTIONS);
  for (const f of opts.functions ?? []) functions.add(f.startsWith('pg_catalog.') ? f.slice('pg_catalog.'.length) : f);
  return { functions, parameters: opts.parameters, ...(opts.relations === undefined ? {} : { relations: new Set(opts.relations) }) };
}

class Unverified extends Error {}

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
/** Node wrappers are keyed by their PascalCase node kind; struct fields are lower-case. */
const isNodeKind = (key: string): boolean => /^[A-Z]/.test(key);

/**
 * Why `sql` is not a verified read under `policy`, or undefined when it is one. The message
 * names the construct (the function, relation, clause or node kind), never a bound value.
 */
export function readOnlyProblem(sql: string, policy: ReadPolicy): string | undefined {
  const select = singleStatement(sql);
  if (typeof select === 'string') return select;
  return verify(select, policy);
}

function verify(select: Json, policy: ReadPolicy): string | undefined {
  try {
    new Verifier(policy).select(select, new Set());
    return undefined;
  } catch (err) {
    if (err instanceof Unverified) return err.message;
    // The depth bound keeps well within the stack; this is the fail-closed answer should it not.
    if (err instanceof RangeError) return 'is nested too deeply to verify';
    throw err;
  }
}

/**
 * The statement that reads an ad-hoc query through a cursor, so at most `fetch` rows ever leave
 * the server. The whole text is parsed again: what is sent is exactly one DECLARE of the query
 * that was verified, whatever the query's comments or quoting.
 *
 * @returns the DECLARE text, or the problem that refuses the query.
 */
export function declareVerifiedCursor(cursor: string, query: string, policy: ReadPolicy): { text: string } | { problem: string } {
  const problem = readOnlyProblem(query, policy);
  if (problem !== undefined) return { problem };
  const text = `DECLARE ${cursor} NO SCROLL CURSOR FOR\n${query}`;
  const tree = parse(text);
  const stmts = typeof tree === 'string' ? [] : tree;
  const declared = stmts.length === 1 ? (stmts[0] as Json)['DeclareCursorStmt'] : undefined;
  const inner = isObject(declared) && isObject(declared['query']) ? declared['query']['SelectStmt'] : undefined;
  if (!isObject(inner)) return { problem: 'is not a single SELECT once declared as a cursor' };
  const again = verify(inner, policy);
  return again === undefined ? { text } : { problem: again };
}

function parse(sql: string): unknown[] | string {
  let tree: unknown;
  try {
    tree = parseSync(sql);
  } catch (err) {
    return `does not parse (${err instanceof Error ? err.message : 'parser error'})`;
  }
  const stmts = isObject(tree) && Array.isArray(tree['stmts']) ? tree['stmts'] : [];
  return stmts.map((s: unknown) => (isObject(s) ? s['stmt'] : undefined));
}

function singleStatement(sql: string): Json | string {
  const stmts = parse(sql);
  if (typeof stmts === 'string') return stmts;
  if (stmts.length !== 1) return stmts.length === 0 ? 'is empty' : `is ${stmts.length} statements; a read is exactly one SELECT`;
  const stmt = stmts[0];
  const kind = isObject(stmt) ? Object.keys(stmt)[0] : undefined;
  if (kind !== 'SelectStmt' || !isObject(stmt) || !isObject(stmt[kind])) return `is ${STATEMENT_WORDS[kind ?? ''] ?? kind ?? 'an unknown statement'}, not a SELECT`;
  return stmt[kind];
}

const names = (list: unknown, what: string): string[] => {
  if (!Array.isArray(list)) throw new Unverified(`has a ${what} without a name`);
  return list.map((item: unknown) => {
    const s = isObject(item) && isObject(item['String']) ? item['String']['sval'] : undefined;
    if (typeof s !== 'string') throw new Unverified(`has a ${what} whose name is not plain`);
    return s;
  });
};

/** How deep the verifier follows the tree; deeper statements are refused, not half-checked. */
const MAX_DEPTH = 500;

class Verifier {
  private depth = 0;

  constructor(private readonly policy: ReadPolicy) {}

  /** One SELECT body; `scope` holds the CTE names an unqualified relation may refer to. */
  select(body: Json, scope: ReadonlySet<string>): void {
    if (body['intoClause'] !== undefined) throw new Unverified('uses SELECT … INTO, which creates a table');
    if (body['lockingClause'] !== undefined) throw new Unverified('has a locking clause (FOR UPDATE / FOR SHARE …), which takes row locks');
    let inner = scope;
    for (const [field, value] of Object.entries(body)) {
      if (field === 'withClause') inner = this.with(value, scope);
    }
    for (const [field, value] of Object.entries(body)) {
      if (field === 'withClause') continue;
      if (field === 'larg' || field === 'rarg') {
        if (!isObject(value)) throw new Unverified('has a malformed set operation');
        this.select(value, inner);
      } else {
        this.walk(value, inner);
      }
    }
  }

  /** Checks every CTE and returns the scope the main query sees. */
  private with(clause: unknown, scope: ReadonlySet<string>): ReadonlySet<string> {
    if (!isObject(clause) || !Array.isArray(clause['ctes'])) throw new Unverified('has a malformed WITH clause');
    const recursive = clause['recursive'] === true;
    const ctes = clause['ctes'].map((c: unknown) => {
      const cte = isObject(c) ? c['CommonTableExpr'] : undefined;
      if (!isObject(cte) || typeof cte['ctename'] !== 'string') throw new Unverified('has a malformed WITH clause');
      return cte;
    });
    const all = new Set([...scope, ...ctes.map((c) => c['ctename'] as string)]);
    const visible = new Set(scope);
    for (const cte of ctes) {
      const name = cte['ctename'] as string;
      const query = cte['ctequery'];
      const kind = isObject(query) ? Object.keys(query)[0] : undefined;
      if (kind !== 'SelectStmt' || !isObject(query) || !isObject(query[kind])) {
        throw new Unverified(`has WITH ${name} AS (${STATEMENT_WORDS[kind ?? ''] ?? kind ?? '?'} …): every CTE must be a SELECT`);
      }
      // A non-recursive CTE sees only the CTEs before it; a later name there means a relation.
      this.select(query[kind], recursive ? all : visible);
      for (const [field, value] of Object.entries(cte)) {
        if (field !== 'ctequery') this.walk(value, all);
      }
      visible.add(name);
    }
    return all;
  }

  private walk(value: unknown, scope: ReadonlySet<string>): void {
    if (++this.depth > MAX_DEPTH) throw new Unverified('is nested too deeply to verify');
    try {
      if (Array.isArray(value)) {
        for (const item of value) this.walk(item, scope);
      } else if (isObject(value)) {
        for (const [key, inner] of Object.entries(value)) {
          if (isNodeKind(key)) this.node(key, inner, scope);
          else this.field(key, inner, scope);
        }
      }
    } finally {
      this.depth--;
    }
  }

  private field(key: string, value: unknown, scope: ReadonlySet<string>): void {
    // These fields hold SELECT clauses or types inline (not as wrapped nodes), so they are
    // recognised by name wherever they occur.
    if (key === 'intoClause') throw new Unverified('uses SELECT … INTO, which creates a table');
    if (key === 'lockingClause') throw new Unverified('has a locking clause (FOR UPDATE / FOR SHARE …), which takes row locks');
    if (key === 'typeName') this.type(value);
    this.walk(value, scope);
  }

  private node(kind: string, body: unknown, scope: ReadonlySet<string>): void {
    if (!READ_NODES.has(kind)) {
      const word = STATEMENT_WORDS[kind];
      throw new Unverified(word ? `contains ${word}, which is not a read` : `uses ${kind}, which is not in the verified SELECT subset`);
    }
    if (!isObject(body)) return;
    switch (kind) {
      case 'SelectStmt':
        return this.select(body, scope);
      case 'FuncCall':
        this.func(body['funcname']);
        break;
      case 'RangeVar':
        return this.relation(body, scope);
      case 'A_Expr':
        this.operator(body['name']);
        break;
      case 'SortBy':
        if (body['useOp'] !== undefined) this.operator(body['useOp']);
        break;
      case 'SubLink':
        if (body['operName'] !== undefined) this.operator(body['operName']);
        break;
      case 'ParamRef':
        if (!this.policy.parameters) throw new Unverified('has a bind parameter ($n), which this read cannot bind');
        return;
    }
    for (const [key, inner] of Object.entries(body)) {
      if (key === 'funcname' || (kind === 'A_Expr' && key === 'name') || key === 'useOp' || key === 'operName') continue;
      this.field(key, inner, scope);
    }
  }

  private func(funcname: unknown): void {
    const parts = names(funcname, 'function call');
    const shown = parts.join('.');
    const allowed = this.policy.functions;
    const ok =
      parts.length === 1
        ? allowed.has(parts[0] as string)
        : parts.length === 2 && (parts[0] === 'pg_catalog' ? allowed.has(parts[1] as string) : allowed.has(shown));
    if (!ok) throw new Unverified(`calls function ${shown}, which is not in the allowed functions`);
  }

  private operator(name: unknown): void {
    const parts = names(name, 'operator');
    const symbol = parts[parts.length - 1] ?? '';
    const qualifierOk = parts.length === 1 || (parts.length === 2 && parts[0] === 'pg_catalog');
    if (!qualifierOk || !READ_OPERATORS.has(symbol)) throw new Unverified(`uses operator ${parts.join('.')}, which is not a built-in operator`);
  }

  private type(typeName: unknown): void {
    if (!isObject(typeName)) throw new Unverified('has a malformed type name');
    if (typeName['pct_type'] === true || typeName['setof'] === true) throw new Unverified('uses a %TYPE or SETOF type');
    const parts = names(typeName['names'], 'type');
    const base = parts.length === 2 && parts[0] === 'pg_catalog' ? parts[1] : parts.length === 1 ? parts[0] : undefined;
    if (base === undefined || !READ_TYPES.has(base)) throw new Unverified(`casts to type ${parts.join('.')}, which is not a built-in scalar type`);
  }

  private relation(rv: Json, scope: ReadonlySet<string>): void {
    const rel = rv['relname'];
    const schema = rv['schemaname'];
    if (typeof rel !== 'string' || rv['catalogname'] !== undefined || (schema !== undefined && typeof schema !== 'string')) {
      throw new Unverified('references a relation by a database-qualified or malformed name');
    }
    if (schema === undefined && scope.has(rel)) return;
    const name = schema === undefined ? rel : `${schema}.${rel}`;
    if (this.policy.relations !== undefined && !this.policy.relations.has(name)) {
      throw new Unverified(`reads relation ${name}, which is not in the allowed relations`);
    }
  }
}
