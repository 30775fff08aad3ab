/**
 * Connector reads as agent tools (issue 11), on a real turn-worker process (`everdict start
 * --service turn-worker`, connectors declared in its fleet config): a scripted agent calls a read of a REAL
 * target HTTP service and a reviewed read template of a REAL target Postgres estate in one
 * turn, then the estate's ad-hoc `sql.select`.
 *
 *  - each call is a journal row (task + turn + ordinal, `read`, completed) whose response paper
 *    holds the document the model was shown: origin (connector, operation, target), trust, data
 *    class, content hash, size and truncation, and the result;
 *  - the target sees exactly one request per read; the next model request carries the results;
 *  - a query that is not a verified read is refused by the connector before contact (a tool
 *    error the model sees); a large result is stored whole as a paper (K6);
 *  - a read outside the case type's scope.reads is a `refused` row and reaches nothing;
 *  - a target that gives no reply at all parks the task `connector_down`; once it answers, the
 *    backoff wakes the task and the read runs again under its call id: one request lands.
 */
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson, payloadHash } from '@everdict/contracts';
import type { FleetConfig } from '@everdict/contracts';
import { freePort } from '@everdict/testkit';
import { openTestCase } from '../turns/helpers.js';
import { CONNECTOR_ENV, effectsFixture, eventually, fleetConfig, type EffectsFixture, type ServiceProc } from './helpers.js';

let f: EffectsFixture;
let node: ServiceProc;
/** Where the `ledger` connector points; nothing listens there until a test starts it. */
let ledgerPort: number;
let ledger: http.Server | undefined;
const ledgerRequests: string[] = [];
let config: FleetConfig;

const BILLING = { system: 'billing', environment: 'test' };
const ESTATE = { system: 'ledger-db', environment: 'test' };
const BIG_QUERY = "SELECT repeat('x', 9000) AS filler FROM entries WHERE entry_id = 'e-r1'";

function script(name: string, steps: unknown[]): string {
  writeFileSync(join(f.dir, `${name}.json`), JSON.stringify({ steps }));
  return `${name}.json`;
}

beforeAll(async () => {
  f = await effectsFixture('effects_reads');
  f.target.balances.set('acct-r1', 4321);
  ledgerPort = await freePort();
  await f.estate.pool.query("INSERT INTO entries (entry_id, account, amount) VALUES ('e-r1', 'acct-r1', 7), ('e-r1', 'acct-r1', 9), ('e-r2', 'acct-r2', 5)");
  const base = fleetConfig();
  const route = (file: string) => ({ adapter: 'scripted' as const, model: 'scripted', scriptPath: file });
  const reads = ['billing/accounts.get', 'estate/entries.count', 'estate/sql.select'];
  config = {
    ...base,
    routes: {
      reader: route(
        script('reader', [
          {
            toolCalls: [
              { name: 'billing__accounts_get', arguments: { accountId: 'acct-r1' } },
              { name: 'estate__entries_count', arguments: { entryId: 'e-r1' } },
            ],
          },
          {
            toolCalls: [
              { name: 'estate__sql_select', arguments: { query: "SELECT nextval('entries_seq')" } },
              { name: 'estate__sql_select', arguments: { query: BIG_QUERY } },
            ],
          },
          { text: 'Balance and entries read.' },
        ]),
      ),
      flaky: route(script('flaky', [{ toolCalls: [{ name: 'ledger__balance_get', arguments: { id: 'l-1' } }] }, { text: 'Ledger read.' }])),
      narrow: route(script('narrow', [{ toolCalls: [{ name: 'estate__entries_count', arguments: { entryId: 'e-r2' } }, { name: 'billing__accounts_get', arguments: { accountId: 'acct-r1' } }] }, { text: 'Only billing was mine to read.' }])),
    },
    profiles: {
      reader: { version: '1', route: 'reader', prompt: 'You read billing and the ledger.', reads },
      narrow: { version: '1', route: 'narrow', prompt: 'You read billing.', reads },
      flaky: { version: '1', route: 'flaky', prompt: 'You read the ledger.', reads: ['ledger/balance.get'] },
    },
    caseTypes: {
      reads: { rootProfile: 'reader', scope: { reads: ['billing/*', 'estate/entries.count', 'estate__sql_select'], writes: [], forbidden: [] } },
      narrow: { rootProfile: 'narrow', scope: { reads: ['billing'], writes: [], forbidden: [] } },
      flaky: { rootProfile: 'flaky', scope: { reads: ['ledger'], writes: [], forbidden: [] } },
    },
    connectors: {
      billing: {
        kind: 'http',
        target: BILLING,
        baseUrlEnv: CONNECTOR_ENV.billing,
        timeoutMs: 3000,
        receipts: { path: '/receipts/{idempotencyKey}', conclusive: true },
        operations: { 'accounts.get': { access: 'read', description: 'The balance of one billing account.', method: 'GET', path: '/accounts/{accountId}', params: { accountId: { type: 'string', maxLength: 64, pattern: '[a-z0-9-]+' } } } },
      },
      estate: {
        kind: 'postgres',
        target: ESTATE,
        urlEnv: CONNECTOR_ENV.estate,
        operations: {
          'entries.count': { access: 'read', sql: 'SELECT count(*)::int AS n, sum(amount)::int AS total FROM entries WHERE entry_id = :entryId', params: { entryId: { type: 'string', maxLength: 64 } } },
          'sql.select': { access: 'read', select: { relations: ['entries'] } },
        },
      },
      ledger: {
        kind: 'http',
        target: { system: 'ledger', environment: 'test' },
        baseUrl: `http://127.0.0.1:${ledgerPort}/api`,
        timeoutMs: 2000,
        receipts: { path: '/receipts/{idempotencyKey}', conclusive: false },
        operations: { 'balance.get': { access: 'read', method: 'GET', path: '/balance/{id}', params: { id: { type: 'string', maxLength: 32 } } } },
      },
    },
    runtime: { providerBackoffMs: { initial: 300, max: 1000 }, sweepIntervalMs: 200 },
  };
  writeFileSync(join(f.dir, 'readers.json'), JSON.stringify(config, null, 2));
  // Debug level: the tool trace (tool started / tool finished) shows how the reads overlapped.
  node = await f.start({ services: ['turn-worker'], env: { EVERDICT_CONFIG: join(f.dir, 'readers.json'), LOG_LEVEL: 'debug' } });
});

afterAll(async () => {
  ledger?.closeAllConnections();
  await new Promise<void>((r) => (ledger ? ledger.close(() => r()) : r()));
  await f?.close();
});

interface CallRow {
  turn: number;
  ordinal: number;
  kind: string;
  tool_name: string;
  status: string;
  response: string;
}

const open = (caseType: string) => openTestCase(f.store, config, { caseType, originKey: `reads-${caseType}-${Math.random()}`, objective: 'read the account' });

const done = (taskId: string) =>
  eventually(async () => (await f.db.query<{ state: string }>({ text: 'SELECT state FROM tasks WHERE id = $1::uuid', values: [taskId] })).rows[0]?.state === 'done', { timeoutMs: 30_000, what: `task ${taskId} done` });

async function toolRows(taskId: string): Promise<CallRow[]> {
  const { rows } = await f.db.query<CallRow>({
    text: `SELECT c.turn, c.ordinal, c.kind, c.tool_name, c.status, convert_from(paper_document(r.paper_id, r.revision), 'UTF8') AS response
             FROM runtime_calls c JOIN papers p ON p.id = c.response_paper_id JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision
            WHERE c.task_id = $1::uuid AND c.ordinal > 0 ORDER BY c.turn, c.ordinal`,
    values: [taskId],
  });
  return rows;
}

/** The tool messages the model request of `turn` carried. */
async function toldAt(taskId: string, turn: number): Promise<string[]> {
  const { rows } = await f.db.query<{ request: string }>({
    text: `SELECT convert_from(paper_document(r.paper_id, r.revision), 'UTF8') AS request FROM runtime_calls c JOIN papers p ON p.id = c.request_paper_id
             JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE c.task_id = $1::uuid AND c.turn = $2::int AND c.ordinal = 0`,
    values: [taskId, turn],
  });
  const request = JSON.parse(rows[0]!.request) as { request: { messages: { role: string; content: string }[]; tools: { name: string; inputSchema: unknown }[] } };
  return request.request.messages.filter((m) => m.role === 'tool').map((m) => m.content);
}

const record = (row: CallRow) => JSON.parse(row.response) as { content: string; outcome: string; refusal: string | null; offloadedRef: string | null };

describe('connector reads as agent tools', () => {
  it('reads a real HTTP target and a Postgres estate in one turn: journalled in order, one request each, results in the next request', async () => {
    const { taskId } = await open('reads');
    await done(taskId);

    const rows = await toolRows(taskId);
    expect(rows.map((r) => [r.turn, r.ordinal, r.kind, r.tool_name, r.status])).toEqual([
      [0, 1, 'read', 'billing__accounts_get', 'completed'],
      [0, 2, 'read', 'estate__entries_count', 'completed'],
      [1, 1, 'read', 'estate__sql_select', 'failed'], // a tool error: the query is not a verified read
      [1, 2, 'read', 'estate__sql_select', 'completed'],
    ]);

    const http = JSON.parse(record(rows[0]!).content) as Record<string, unknown>;
    const httpResult = { status: 200, body: { id: 'acct-r1', balanceCents: 4321 } };
    expect(http).toMatchObject({
      origin: { connector: 'billing', operation: 'accounts.get', target: BILLING },
      trust: 'external',
      dataClass: 'estate',
      contentHash: payloadHash(httpResult),
      bytes: Buffer.byteLength(canonicalJson(httpResult)),
      truncated: false,
      result: httpResult,
    });
    const pgResult = { rowCount: 1, rows: [{ n: 2, total: 16 }] };
    expect(JSON.parse(record(rows[1]!).content)).toMatchObject({
      origin: { connector: 'estate', operation: 'entries.count', target: ESTATE },
      contentHash: payloadHash(pgResult),
      bytes: Buffer.byteLength(canonicalJson(pgResult)),
      truncated: false,
      result: pgResult,
    });

    // The two independent reads of turn 0 ran side by side: both started before either finished.
    const trace = node
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg?: string; taskId?: string; turn?: number; tool?: string })
      .filter((l) => l.taskId === taskId && l.turn === 0 && (l.msg === 'tool started' || l.msg === 'tool finished'));
    expect(trace.map((l) => l.msg)).toEqual(['tool started', 'tool started', 'tool finished', 'tool finished']);

    // One request per read at the target, nothing else.
    expect(f.target.requests.filter((r) => r.url === '/api/accounts/acct-r1')).toHaveLength(1);
    expect(f.target.requests).toHaveLength(1);

    // The next model request carries exactly what the journal holds.
    expect(await toldAt(taskId, 1)).toEqual([record(rows[0]!).content, record(rows[1]!).content]);

    // A query that is not a verified read is refused by the connector before contact.
    const refused = record(rows[2]!);
    expect(refused.outcome).toBe('tool_error');
    expect(refused.content).toMatch(/refused before contacting the target: estate: unverified_read/);

    // A large result is stored whole as a paper; the model sees a preview and the reference (K6).
    const big = record(rows[3]!);
    expect(big.offloadedRef).toMatch(/^result:/);
    expect(big.content).toContain(`stored as ${big.offloadedRef}`);
    const { rows: stored } = await f.db.query<{ body: string }>({
      text: `SELECT convert_from(r.bytes, 'UTF8') AS body FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE p.name = $1::text`,
      values: [`results/${taskId}/${big.offloadedRef}`],
    });
    const bigResult = { rowCount: 2, rows: [{ filler: 'x'.repeat(9000) }, { filler: 'x'.repeat(9000) }] };
    expect(JSON.parse(stored[0]!.body)).toMatchObject({ origin: { connector: 'estate', operation: 'sql.select' }, contentHash: payloadHash(bigResult), bytes: Buffer.byteLength(canonicalJson(bigResult)), truncated: false });
    expect((await toldAt(taskId, 2)).slice(-2)).toEqual([refused.content, big.content]);
  });

  it('offers each read with its operation parameters as the input schema', async () => {
    const { taskId } = await open('reads');
    await done(taskId);
    const { rows } = await f.db.query<{ request: string }>({
      text: `SELECT convert_from(paper_document(r.paper_id, r.revision), 'UTF8') AS request FROM runtime_calls c JOIN papers p ON p.id = c.request_paper_id
               JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE c.task_id = $1::uuid AND c.turn = 0 AND c.ordinal = 0`,
      values: [taskId],
    });
    const tools = (JSON.parse(rows[0]!.request) as { request: { tools: { name: string; description: string; inputSchema: unknown }[] } }).request.tools;
    expect(tools.find((t) => t.name === 'billing__accounts_get')).toEqual({
      name: 'billing__accounts_get',
      description: 'The balance of one billing account.',
      inputSchema: { type: 'object', additionalProperties: false, required: ['accountId'], properties: { accountId: { type: 'string', maxLength: 64, pattern: '^(?:[a-z0-9-]+)$' } } },
    });
    expect(tools.find((t) => t.name === 'estate__sql_select')?.inputSchema).toMatchObject({ required: ['query'], properties: { query: { type: 'string', minLength: 1, maxLength: 10000 } } });
  });

  it('a read outside the case type scope.reads is a refused row and reaches nothing; the task completes', async () => {
    const before = f.target.requests.length;
    const { taskId } = await open('narrow');
    await done(taskId);
    const rows = await toolRows(taskId);
    expect(rows.map((r) => [r.turn, r.ordinal, r.tool_name, r.status])).toEqual([
      [0, 1, 'estate__entries_count', 'refused'],
      [0, 2, 'billing__accounts_get', 'completed'],
    ]);
    expect(record(rows[0]!).refusal).toBe('read_out_of_scope');
    expect(f.target.requests.length - before).toBe(1); // only the in-scope billing read
  });

  it('a target that gives no reply parks the task connector_down; once it answers, the read runs again and the task completes', async () => {
    const { taskId } = await open('flaky');
    const parked = await eventually(
      async () => {
        const { rows } = await f.db.query<{ state: string; park_reason: string | null; park_detail: Record<string, unknown> | null }>({ text: 'SELECT state, park_reason, park_detail FROM tasks WHERE id = $1::uuid', values: [taskId] });
        return rows[0]?.park_reason === 'connector_down' ? rows[0] : undefined;
      },
      { timeoutMs: 30_000, what: 'task parked connector_down' },
    );
    expect(parked.park_detail).toMatchObject({ connector: 'ledger' });

    ledger = http.createServer((req, res) => {
      ledgerRequests.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'l-1', cents: 99 }));
    });
    await new Promise<void>((r) => ledger!.listen(ledgerPort, '127.0.0.1', r));
    await done(taskId);

    const rows = await toolRows(taskId);
    expect(rows.map((r) => [r.turn, r.ordinal, r.tool_name, r.status])).toEqual([[0, 1, 'ledger__balance_get', 'completed']]);
    expect(JSON.parse(record(rows[0]!).content)).toMatchObject({ origin: { connector: 'ledger', operation: 'balance.get' }, result: { status: 200, body: { id: 'l-1', cents: 99 } } });
    expect(ledgerRequests).toEqual(['/api/balance/l-1']);
  });
});
