/**
 * The Postgres estate connector: reviewed SQL templates, each mutation executed atomically
 * with its receipt in the TARGET database, so WhatLanded is conclusive (see receipts.ts).
 *
 * Reads are verified read-only, by three separate controls: the statement is a verified SELECT
 * (readonly.ts: at review for a template, per call before any contact for `sql.select`); it
 * runs in a READ ONLY transaction under the statement timeout; and, with `readRole`, as a role
 * whose database privileges bound what it can see.
 *
 * Execute, in one target transaction:
 *   BEGIN → claim the receipt row for the idempotency key (a taken key returns the recorded
 *   receipt and runs nothing) → the template → row count must equal the expected count, else
 *   ROLLBACK → complete the receipt → COMMIT.
 * No model call, human wait or other I/O happens while the transaction is open.
 */
import pg from 'pg';
import type { EffectPacket, EffectParams } from '@everdict/contracts';
import { EverdictError, packetDigest } from '@everdict/contracts';
import { admitIdempotencyKey, admitPacket, admitRead, admitTarget } from '../admission.js';
import { preflightChecks } from '../checks.js';
import type {
  CallIdentity,
  Connector,
  ConnectorCapability,
  ConnectorContext,
  DryRunResult,
  JsonValue,
  LandedReport,
  OperationCapability,
  PreflightResult,
  ReadOperationCapability,
  ReadResult,
} from '../connector.js';
import { ConnectorRefused, ConnectorUnavailable } from '../errors.js';
import type { ParamSpec, ParamType } from '../params.js';
import { paramSpecProblems } from '../params.js';
import { POSTGRES_CONNECTOR_KIND, pgTemplateHash, templateHash } from '../template-hash.js';
import type { Classified } from './classify.js';
import { classifyCheckFailure, classifyExecuteFailure, classifyPriorReceipt, receiptFromRow, sqlState } from './classify.js';
import type { PgTemplateConfig, PostgresEstateConfig } from './config.js';
import type { ReadPolicy } from './readonly.js';
import { declareVerifiedCursor, policyNameProblems, readOnlyProblem, readPolicy } from './readonly.js';
import type { ReceiptRow, Statement } from './receipts.js';
import { DEFAULT_RECEIPTS_TABLE, claimReceipt, completeReceipt, createReceiptsTable, isValidReceiptsTable, selectReceipt, setTransactionTimeouts } from './receipts.js';
import type { CompiledTemplate } from './template.js';
import { TemplateError, bindTemplate, compileTemplate } from './template.js';

const DEFAULT_STATEMENT_TIMEOUT_MS = 10_000;
const DEFAULT_LOCK_TIMEOUT_MS = 5_000;
const DEFAULT_MAX_READ_ROWS = 1000;
/** The ad-hoc read a connector with `select` registers. */
export const SELECT_OPERATION = 'sql.select';
const MAX_QUERY_LENGTH = 10_000;
const SELECT_CURSOR = 'everdict_select';
const ROLE_NAME = /^[a-z_][a-z0-9_$]{0,62}$/;
/** Rows a mutation's RETURNING clause may record in the receipt. */
const MAX_RETURNED_ROWS = 100;
const CONNECTOR_NAME = /^[a-z][a-z0-9_-]{0,63}$/;
const OPERATION_NAME = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;
const EFFECT_CLASS = /^[a-z][a-z0-9_-]{0,63}$/;

/** The slice of a pg client the connector uses (a `pg.PoolClient` satisfies it). */
export interface PgClientPort {
  query(text: string, values?: unknown[]): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }>;
  /** `true` destroys the connection instead of returning it to the pool. */
  release(destroy?: boolean): void;
  on(event: 'error', listener: (err: Error) => void): unknown;
  removeListener(event: 'error', listener: (err: Error) => void): unknown;
}

type Lease = Pick<PgClientPort, 'query' | 'release'>;

/**
 * Checks a client out for one call. While checked out, a pg client has no pool listener, and a
 * connection that dies emits 'error' besides failing the active query; the failed query is
 * what the call reports, so the event is absorbed instead of crashing the process.
 */
async function checkout(pool: PgPoolPort): Promise<Lease> {
  const client = await pool.connect();
  const absorb = () => undefined;
  client.on('error', absorb);
  return {
    query: (text, values) => client.query(text, values),
    release: (destroy) => {
      client.removeListener('error', absorb);
      client.release(destroy);
    },
  };
}

/** The slice of a pg pool the connector uses (a `pg.Pool` satisfies it). */
export interface PgPoolPort {
  connect(): Promise<PgClientPort>;
  end(): Promise<void>;
}

/**
 * A pool for one target database. Errors of idle or broken clients are absorbed here because
 * each call already reports its own failure; an unhandled pool 'error' would crash the process.
 */
export function estatePool(connectionString: string, opts: { max?: number; applicationName?: string } = {}): pg.Pool {
  const pool = new pg.Pool({ connectionString, max: opts.max ?? 4, application_name: opts.applicationName ?? 'everdict-connector' });
  pool.on('error', () => undefined);
  return pool;
}

interface Template {
  readonly config: PgTemplateConfig;
  readonly compiled: CompiledTemplate;
}

/** A configuration that passed review. */
export interface ReviewedPostgres {
  readonly templates: ReadonlyMap<string, Template>;
  /** Present when the connector registers `sql.select`. */
  readonly select?: { readonly policy: ReadPolicy; readonly maxRows: number };
}

/** A read ready to send: nothing about it is decided after contact. */
interface PlannedRead {
  readonly text: string;
  readonly values: unknown[];
  readonly maxRows: number;
  /** Rows are fetched from this cursor, which `text` declares. */
  readonly cursor?: string;
}

export class PostgresEstateConnector implements Connector {
  readonly name: string;
  private readonly capability: ConnectorCapability;
  private readonly templates: ReadonlyMap<string, Template>;
  private readonly select: ReviewedPostgres['select'];
  private readonly readRole: string | undefined;
  private readonly table: string;
  private readonly statementTimeoutMs: number;
  private readonly lockTimeoutMs: number;

  /** @throws EverdictError `invalid_connector_config` listing every problem with the templates. */
  constructor(config: PostgresEstateConfig, private readonly pool: PgPoolPort) {
    const reviewed = reviewPostgresConfig(config);
    this.templates = reviewed.templates;
    this.select = reviewed.select;
    this.readRole = config.readRole;
    this.name = config.name;
    this.table = config.receiptsTable ?? DEFAULT_RECEIPTS_TABLE;
    this.statementTimeoutMs = config.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
    this.lockTimeoutMs = config.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS;
    this.capability = describePostgres(config, reviewed);
  }

  describe(): ConnectorCapability {
    return this.capability;
  }

  /** Creates the receipts table in the target if it is missing. An estate owner may create it instead. */
  async installReceipts(): Promise<void> {
    const client = await checkout(this.pool);
    try {
      await run(client, createReceiptsTable(this.table));
      client.release();
    } catch (err) {
      client.release(true);
      throw err;
    }
  }

  async read(operation: string, params: EffectParams, ctx: ConnectorContext): Promise<ReadResult> {
    admitRead(this.capability, operation, params);
    const planned = this.planRead(operation, params);
    const { maxRows } = planned;
    let client: Lease;
    try {
      client = await checkout(this.pool);
    } catch (err) {
      throw new ConnectorUnavailable(this.name, operation, 'no connection', err);
    }
    try {
      // READ ONLY: the database itself refuses any write that verification could not see.
      await client.query('BEGIN READ ONLY');
      if (this.readRole !== undefined) await client.query(`SET LOCAL ROLE "${this.readRole}"`);
      await run(client, setTransactionTimeouts(this.statementTimeoutMs, this.lockTimeoutMs));
      let result = await client.query(planned.text, planned.values);
      if (planned.cursor !== undefined) result = await client.query(`FETCH FORWARD ${maxRows + 1} FROM ${planned.cursor}`);
      await client.query('COMMIT');
      client.release();
      if (result.rows.length > maxRows) {
        throw new EverdictError('read_too_large', `${this.name}: ${operation} returned more than ${maxRows} rows`, { details: { connector: this.name, operation, maxRows } });
      }
      const rows = JSON.parse(JSON.stringify(result.rows)) as JsonValue[];
      return { operation, value: { rowCount: rows.length, rows }, observedAt: ctx.clock.now().toISOString() };
    } catch (err) {
      if (err instanceof EverdictError) throw err;
      client.release(true);
      throw readFailure(this.name, operation, err);
    }
  }

  preflight(packet: EffectPacket, ctx: ConnectorContext): Promise<PreflightResult> {
    return preflightChecks(this.capability, (op, params, c) => this.read(op, params, c), packet, ctx);
  }

  async dryRun(packet: EffectPacket): Promise<DryRunResult> {
    admitPacket(this.capability, packet);
    const stmt = bindTemplate(this.template(packet.operation.name).compiled, packet.params);
    return { kind: 'render', rendered: { sql: stmt.text, values: stmt.values as JsonValue[] } };
  }

  async execute(packet: EffectPacket, call: CallIdentity, ctx: ConnectorContext): Promise<LandedReport> {
    const { expectedCounts } = admitPacket(this.capability, packet);
    admitIdempotencyKey(this.capability, call.idempotencyKey);
    const stmt = bindTemplate(this.template(packet.operation.name).compiled, packet.params);
    const expectedRows = expectedCounts['rows'];
    if (expectedRows === undefined) throw new ConnectorRefused(this.name, 'missing_expected_count', [{ path: '/expectedCounts/rows', message: 'is required' }]);
    const digest = packetDigest(packet);
    const key = call.idempotencyKey;

    let client: Lease;
    try {
      client = await checkout(this.pool);
    } catch {
      return this.report({ outcome: 'not_applied', reason: 'not_sent', established: 'no connection to the target database could be opened; nothing was sent' }, ctx);
    }
    let commitSent = false;
    try {
      await client.query('BEGIN');
      await run(client, setTransactionTimeouts(this.statementTimeoutMs, this.lockTimeoutMs));
      const claimed = await run(client, claimReceipt(this.table, { idempotencyKey: key, operation: packet.operation.name, outcome: 'applied', packetDigest: digest, callId: call.callId }));
      if (claimed.rowCount === 0) {
        const prior = await run(client, selectReceipt(this.table, key));
        await client.query('ROLLBACK');
        client.release();
        return this.report(classifyPriorReceipt(prior.rows[0] as unknown as ReceiptRow, digest, 'execute'), ctx);
      }
      const result = await client.query(stmt.text, stmt.values);
      const rows = result.rowCount ?? 0;
      if (rows !== expectedRows) {
        await client.query('ROLLBACK');
        client.release();
        return this.report(
          { outcome: 'not_applied', reason: 'row_count_mismatch', established: `the statement affected ${rows} rows where ${expectedRows} were expected; the transaction was rolled back` },
          ctx,
        );
      }
      const returned = JSON.parse(JSON.stringify(result.rows.slice(0, MAX_RETURNED_ROWS))) as JsonValue[];
      const completed = await run(client, completeReceipt(this.table, key, rows, returned));
      const appliedAt = completed.rows[0]?.['applied_at'];
      commitSent = true;
      await client.query('COMMIT');
      client.release();
      return this.report(
        {
          outcome: 'applied',
          established: 'committed in one target transaction with its receipt',
          receipt: {
            idempotencyKey: key,
            operation: packet.operation.name,
            callId: call.callId,
            packetDigest: digest,
            rows,
            returned,
            appliedAt: appliedAt instanceof Date ? appliedAt.toISOString() : null,
          },
        },
        ctx,
      );
    } catch (err) {
      // Destroying the connection ends any open transaction on the server without COMMIT.
      client.release(true);
      return this.report(classifyExecuteFailure(err, commitSent), ctx);
    }
  }

  /**
   * Consults the receipts table. When no receipt exists, the check writes a `not_applied` row
   * for the key — waiting first for any open transaction holding it — so its answer stays true:
   * no execution can apply under that key afterwards.
   */
  async whatLanded(packet: EffectPacket, call: CallIdentity, ctx: ConnectorContext): Promise<LandedReport> {
    admitTarget(this.capability, packet);
    admitIdempotencyKey(this.capability, call.idempotencyKey);
    const digest = packetDigest(packet);
    let client: Lease;
    try {
      client = await checkout(this.pool);
    } catch (err) {
      return this.report(classifyCheckFailure(err), ctx);
    }
    try {
      await client.query('BEGIN');
      await run(client, setTransactionTimeouts(this.statementTimeoutMs, this.lockTimeoutMs));
      const fenced = await run(
        client,
        claimReceipt(this.table, { idempotencyKey: call.idempotencyKey, operation: packet.operation.name, outcome: 'not_applied', packetDigest: digest, callId: call.callId }),
      );
      if (fenced.rowCount === 0) {
        const prior = await run(client, selectReceipt(this.table, call.idempotencyKey));
        await client.query('ROLLBACK');
        client.release();
        const row = prior.rows[0] as unknown as ReceiptRow;
        const classified = classifyPriorReceipt(row, digest, 'whatLanded');
        return this.report(row.outcome === 'not_applied' ? { ...classified, established: 'an earlier WhatLanded check found no receipt and fenced this key; nothing can apply under it' } : classified, ctx);
      }
      await client.query('COMMIT');
      client.release();
      return this.report(
        {
          outcome: 'not_applied',
          reason: 'no_receipt',
          established: 'no receipt existed once every transaction holding the key had finished; the key is now fenced, so a late execution cannot apply',
        },
        ctx,
      );
    } catch (err) {
      client.release(true);
      return this.report(classifyCheckFailure(err), ctx);
    }
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  /** The stored receipt row of a key, if any (for operators and tests). */
  async receipt(idempotencyKey: string): Promise<ReturnType<typeof receiptFromRow> | undefined> {
    const client = await checkout(this.pool);
    try {
      const res = await run(client, selectReceipt(this.table, idempotencyKey));
      client.release();
      const row = res.rows[0] as unknown as ReceiptRow | undefined;
      return row === undefined ? undefined : receiptFromRow(row);
    } catch (err) {
      client.release(true);
      throw err;
    }
  }

  /**
   * Decides, before contact, exactly what a read sends. `sql.select` verifies its query here:
   * a query that is not a verified read is refused without a connection being checked out.
   */
  private planRead(operation: string, params: EffectParams): PlannedRead {
    if (operation === SELECT_OPERATION && this.select !== undefined) {
      const declared = declareVerifiedCursor(SELECT_CURSOR, String(params['query']), this.select.policy);
      if ('problem' in declared) throw new ConnectorRefused(this.name, 'unverified_read', [{ path: '/params/query', message: declared.problem }]);
      return { text: declared.text, values: [], maxRows: this.select.maxRows, cursor: SELECT_CURSOR };
    }
    const template = this.template(operation);
    const stmt = bindTemplate(template.compiled, params);
    return { text: stmt.text, values: stmt.values, maxRows: template.config.maxRows ?? DEFAULT_MAX_READ_ROWS };
  }

  private template(name: string): Template {
    const template = this.templates.get(name);
    if (template === undefined) throw new ConnectorRefused(this.name, 'unregistered_operation', [{ path: '/operation', message: 'is not a registered template' }]);
    return template;
  }

  private report(classified: Classified, ctx: ConnectorContext): LandedReport {
    return { ...classified, observedAt: ctx.clock.now().toISOString() };
  }
}

function run(client: Lease, stmt: Statement): Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }> {
  return client.query(stmt.text, [...stmt.values]);
}

// Classes of SQLSTATE that say the target could not answer now, not that the read is wrong.
const UNAVAILABLE_CLASSES = ['08', '53', '57', '58', '40'];

function readFailure(connector: string, operation: string, err: unknown): EverdictError {
  const state = sqlState(err);
  if (state === undefined || UNAVAILABLE_CLASSES.includes(state.slice(0, 2)) || state === '55P03') {
    return new ConnectorUnavailable(connector, operation, state === undefined ? 'connection failure' : `SQLSTATE ${state}`, err, state !== undefined);
  }
  return new EverdictError('read_failed', `${connector}: ${operation} failed on the target (SQLSTATE ${state})`, { cause: err, details: { connector, operation, sqlState: state } });
}

/**
 * Reviews the configuration once, at construction — before any contact with the target — and
 * compiles every template; every `read` template must be a verified read-only SELECT.
 *
 * @throws EverdictError `invalid_connector_config` listing every problem.
 */
export function reviewPostgresConfig(config: PostgresEstateConfig): ReviewedPostgres {
  const problems: string[] = [];
  if (!CONNECTOR_NAME.test(config.name)) problems.push('name must match ^[a-z][a-z0-9_-]*$');
  if (config.receiptsTable !== undefined && !isValidReceiptsTable(config.receiptsTable)) problems.push('receiptsTable must be a plain (optionally schema-qualified) lower-case identifier');
  if (config.readRole !== undefined && (typeof config.readRole !== 'string' || !ROLE_NAME.test(config.readRole))) problems.push('readRole must be a plain lower-case role name');
  const nameProblems = [...policyNameProblems('relations', config.relations), ...policyNameProblems('allowedFunctions', config.allowedFunctions)];
  problems.push(...nameProblems);
  const templatePolicy = readPolicy({ functions: config.allowedFunctions ?? [], ...(config.relations === undefined ? {} : { relations: config.relations }), parameters: true });
  const select = reviewSelect(config, problems);
  const templates = new Map<string, Template>();
  for (const t of config.templates) {
    const where = `template ${JSON.stringify(t.name)}`;
    if (!OPERATION_NAME.test(t.name)) problems.push(`${where}: name is not a registrable operation name`);
    if (templates.has(t.name)) problems.push(`${where}: declared twice`);
    if (t.name === SELECT_OPERATION) problems.push(`${where}: ${SELECT_OPERATION} is the ad-hoc read that \`select\` registers`);
    if (t.kind !== 'mutate' && t.kind !== 'read') problems.push(`${where}: kind must be mutate or read`);
    if (t.kind === 'mutate' && (t.effectClass === undefined || !EFFECT_CLASS.test(t.effectClass))) problems.push(`${where}: a mutation needs an effectClass`);
    if (t.expectedRows !== undefined && (t.kind !== 'mutate' || !Number.isSafeInteger(t.expectedRows) || t.expectedRows < 0)) {
      problems.push(`${where}: expectedRows is a non-negative integer on mutations`);
    }
    if (t.maxRows !== undefined && (t.kind !== 'read' || !Number.isSafeInteger(t.maxRows) || t.maxRows < 1)) problems.push(`${where}: maxRows is a positive integer on reads`);
    const types: Record<string, ParamType> = {};
    for (const [name, spec] of Object.entries(t.params)) {
      problems.push(...paramSpecProblems(name, spec).map((p) => `${where}: ${p}`));
      types[name] = spec.type;
    }
    try {
      const compiled = compileTemplate(t.sql, types);
      for (const name of Object.keys(t.params)) {
        if (!compiled.order.includes(name)) problems.push(`${where}: parameter ${name} is declared but not used`);
      }
      if (t.kind === 'read' && nameProblems.length === 0) {
        const problem = readOnlyProblem(compiled.text, templatePolicy);
        if (problem !== undefined) problems.push(`${where}: not a verified read: ${problem}`);
      }
      templates.set(t.name, { config: t, compiled });
    } catch (err) {
      if (!(err instanceof TemplateError)) throw err;
      problems.push(`${where}: ${err.message}`);
    }
  }
  if (problems.length > 0) {
    throw new EverdictError('invalid_connector_config', `connector ${config.name}: ${problems.join('; ')}`, { details: { connector: config.name, problems } });
  }
  return { templates, ...(select === undefined ? {} : { select }) };
}

function reviewSelect(config: PostgresEstateConfig, problems: string[]): ReviewedPostgres['select'] {
  const select = config.select;
  if (select === undefined) return undefined;
  const before = problems.length;
  if (!Array.isArray(select.relations) || select.relations.length === 0) problems.push('select.relations must name at least one relation');
  else problems.push(...policyNameProblems('select.relations', select.relations));
  problems.push(...policyNameProblems('select.allowedFunctions', select.allowedFunctions));
  if (select.maxRows !== undefined && (!Number.isSafeInteger(select.maxRows) || select.maxRows < 1)) problems.push('select.maxRows must be a positive integer');
  if (problems.length > before) return undefined;
  return {
    policy: readPolicy({ functions: select.allowedFunctions ?? [], relations: select.relations, parameters: false }),
    maxRows: select.maxRows ?? DEFAULT_MAX_READ_ROWS,
  };
}

/** The one parameter of `sql.select`. */
const SELECT_PARAMS: Readonly<Record<string, ParamSpec>> = { query: { type: 'string', minLength: 1, maxLength: MAX_QUERY_LENGTH } };

function describePostgres(config: PostgresEstateConfig, reviewed: ReviewedPostgres): ConnectorCapability {
  const { templates } = reviewed;
  const hashOf = pgTemplateHash;
  const all = [...templates.values()].map((t) => t.config);
  const operations: OperationCapability[] = all
    .filter((t) => t.kind === 'mutate')
    .map((t) => ({
      name: t.name,
      effectClass: t.effectClass ?? '',
      params: t.params,
      dryRun: 'render',
      idempotent: t.idempotent ?? false,
      templateHash: hashOf(t),
      expectedCounts: { rows: t.expectedRows ?? null },
    }));
  // Every read is a verified SELECT in its own READ ONLY transaction: reads are independent.
  const readOperations: ReadOperationCapability[] = all.filter((t) => t.kind === 'read').map((t) => ({ name: t.name, params: t.params, templateHash: hashOf(t), independent: true }));
  if (reviewed.select !== undefined && config.select !== undefined) {
    readOperations.push({ name: SELECT_OPERATION, params: SELECT_PARAMS, templateHash: templateHash(POSTGRES_CONNECTOR_KIND, { select: config.select }), independent: true });
  }
  return {
    connector: config.name,
    kind: POSTGRES_CONNECTOR_KIND,
    target: config.target,
    operations,
    readOperations,
    whatLandedConclusive: true,
    whatLandedMethod: 'receipt row written in the same target transaction as the mutation; a check that finds none fences the key',
  };
}
