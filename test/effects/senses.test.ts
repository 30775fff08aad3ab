/**
 * An agent with senses, end to end (issue 11 acceptance), in ONE real node process running
 * turn-worker, gate, execution-coordinator and reconciler (`everdict start`):
 *
 *   the root agent, in one turn, reads a ticket from a real HTTP service (connector read),
 *   looks up a row of a real Postgres estate through a reviewed template, calls a tool of the
 *   stdio MCP server `@modelcontextprotocol/server-everything` and one of an in-test
 *   streamable-HTTP MCP server; it spawns a child that may read but not write (the child reads
 *   the account and its literal `writes__propose` is refused); then it proposes one credit
 *   citing its reads as evidence. The auditor (a model behind a real HTTP provider) is shown
 *   the cited results with their provenance and nothing of the author; a role holder approves
 *   the gate; the credit lands once at the target.
 *
 * Every number asserted is counted where it happens: the ticket service's and the MCP
 * server's own request counts, the estate's rows, the target's applied credits.
 */
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetConfig } from '@everdict/contracts';
import { mcpHttpServer, providerServer } from '@everdict/testkit';
import { openTestCase } from '../turns/helpers.js';
import { REPO, TOKENS, agentConnectors, effectsFixture, eventually, fleetConfig, type EffectsFixture, type ServiceProc } from './helpers.js';

const EVERYTHING = join(REPO, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const SERVICES = ['turn-worker', 'gate', 'execution-coordinator', 'reconciler'];
const AUTHOR_PROMPT = 'AUTHOR-PROMPT-5e1d: you settle refund tickets.';
const ACCOUNT = 'acct-sense1';
const TICKETS = { system: 'helpdesk', environment: 'test' };

/** The helpdesk: GET /api/tickets/:id, every request counted. */
function helpdesk() {
  const requests: string[] = [];
  const server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    const m = /^\/api\/tickets\/([^/]+)$/.exec(req.url ?? '');
    res.writeHead(m ? 200 : 404, { 'content-type': 'application/json' });
    res.end(JSON.stringify(m ? { id: decodeURIComponent(m[1]!), account: ACCOUNT, ask: 'refund 500 cents for the double charge' } : { error: 'no_route' }));
  });
  return {
    requests,
    async start() {
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/api`;
    },
    stop: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))),
  };
}

/** A knowledge base as a streamable-HTTP MCP server; `calls` counts what its tool was asked. */
function knowledgeBase() {
  const calls: unknown[] = [];
  const build = () => {
    const server = new Server({ name: 'kb', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: [{ name: 'kb_search', description: 'Search the refund policy', inputSchema: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } }],
    }));
    server.setRequestHandler(CallToolRequestSchema, async (req) => {
      calls.push(req.params.arguments);
      return { content: [{ type: 'text', text: 'policy R-7: a double charge is refunded in full' }] };
    });
    return server;
  };
  return { calls, ...mcpHttpServer(build) };
}

let f: EffectsFixture;
let node: ServiceProc;
let config: FleetConfig;
let provider: Awaited<ReturnType<typeof providerServer>>;
const desk = helpdesk();
const kb = knowledgeBase();

function script(name: string, steps: unknown[]): string {
  writeFileSync(join(f.dir, `${name}.json`), JSON.stringify({ steps }));
  return `${name}.json`;
}

beforeAll(async () => {
  f = await effectsFixture('effects_senses');
  provider = await providerServer();
  f.target.balances.set(ACCOUNT, 1000);
  await f.estate.pool.query(`INSERT INTO entries (entry_id, account, amount) VALUES ('charge-77', '${ACCOUNT}', 500), ('charge-77', '${ACCOUNT}', 500)`);
  const deskUrl = await desk.start();
  await kb.start();
  const kbUrl = kb.url();
  const route = (file: string) => ({ adapter: 'scripted' as const, model: 'scripted', scriptPath: file });
  const connectors = agentConnectors();
  config = {
    ...fleetConfig(),
    routes: {
      lead: route(
        script('lead', [
          {
            toolCalls: [
              { name: 'helpdesk__tickets_get', arguments: { ticketId: 'T-77' }, callId: 'read-ticket' },
              { name: 'estate__entries_count', arguments: { entryId: 'charge-77' }, callId: 'read-charges' },
              { name: 'everything__echo', arguments: { message: 'refund T-77' }, callId: 'echo' },
              { name: 'kb__kb_search', arguments: { q: 'double charge' }, callId: 'read-policy' },
            ],
          },
          { toolCalls: [{ name: 'spawn', arguments: { objective: `check the balance of ${ACCOUNT}`, tools: ['billing__accounts_get'] } }] },
          { toolCalls: [{ name: 'wait', arguments: { for: 'children', reason: 'the balance check' } }] },
          {
            toolCalls: [
              {
                name: 'writes__propose',
                arguments: {
                  planStepId: 'refund-t77',
                  connector: 'billing',
                  operation: 'accounts.credit',
                  params: { accountId: ACCOUNT, amountCents: 500 },
                  summary: `refund the double charge of ticket T-77 to ${ACCOUNT}`,
                  revert: { kind: 'manual', description: 'debit the same amount by hand' },
                  evidence: ['read-ticket', 'read-charges', 'read-policy'],
                },
              },
            ],
          },
          { text: 'Refunded.' },
        ]),
      ),
      checker: route(
        script('checker', [
          { toolCalls: [{ name: 'billing__accounts_get', arguments: { accountId: ACCOUNT } }] },
          // Never offered to a child: a literal call is withheld and journalled.
          { toolCalls: [{ name: 'writes__propose', arguments: { planStepId: 'x', connector: 'billing', operation: 'accounts.credit', params: {}, summary: 'x', revert: { kind: 'manual', description: 'x' } } }] },
          { text: 'The balance is 1000 cents; I may not write.' },
        ]),
      ),
      auditor: { adapter: 'openai', model: 'auditor-model', baseUrl: provider.baseUrl },
    },
    profiles: {
      lead: {
        version: '1',
        route: 'lead',
        prompt: AUTHOR_PROMPT,
        reads: ['helpdesk/tickets.get', 'estate/entries.count', 'billing/accounts.get'],
        mcp: [
          { server: 'everything', tools: { echo: { access: 'read' } } },
          { server: 'kb', tools: { kb_search: { access: 'read', effects: { dataAccess: { egress: 'internal' } } } } },
        ],
        childProfile: 'checker',
        auditor: 'auditor',
      },
      checker: { version: '1', route: 'checker', prompt: 'You check balances.', reads: ['billing/accounts.get'] },
      auditor: { version: '1', route: 'auditor', prompt: 'You audit refunds.' },
    },
    caseTypes: {
      refund: { rootProfile: 'lead', scope: { reads: 'all', writes: ['writes__propose', 'billing'], forbidden: [] } },
    },
    connectors: {
      ...connectors,
      helpdesk: {
        kind: 'http',
        target: TICKETS,
        baseUrl: deskUrl,
        timeoutMs: 3000,
        receipts: { path: '/receipts/{idempotencyKey}', conclusive: false },
        operations: { 'tickets.get': { access: 'read', description: 'One helpdesk ticket.', method: 'GET', path: '/tickets/{ticketId}', params: { ticketId: { type: 'string', maxLength: 32 } } } },
      },
    },
    mcpServers: {
      everything: { transport: 'stdio', command: process.execPath, args: [EVERYTHING, 'stdio'] },
      kb: { transport: 'http', url: kbUrl, timeoutMs: 5000 },
    },
    runtime: { leaseTtlMs: 2000, sweepIntervalMs: 200 },
  } as FleetConfig;
  writeFileSync(join(f.dir, 'senses.json'), JSON.stringify(config, null, 2));
  node = await f.start({ services: SERVICES, env: { EVERDICT_CONFIG: join(f.dir, 'senses.json') } });
});

afterAll(async () => {
  await f?.close();
  await provider?.close();
  await desk.stop();
  await kb.stop();
});

interface Row {
  id: string;
  task_id: string;
  turn: number;
  ordinal: number;
  kind: string;
  tool_name: string | null;
  status: string;
  response: { content: string; outcome: string; refusal: string | null } | null;
}

const rows = async (caseId: string) =>
  (
    await f.db.query<Row>({
      text: `SELECT c.id, c.task_id, c.turn, c.ordinal, c.kind, c.tool_name, c.status,
                    (SELECT convert_from(r.bytes, 'UTF8')::jsonb FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE p.id = c.response_paper_id) AS response
               FROM runtime_calls c JOIN tasks t ON t.id = c.task_id
              WHERE t.case_id = $1::uuid AND c.ordinal > 0 ORDER BY t.depth, c.turn, c.ordinal`,
      values: [caseId],
    })
  ).rows;

const taskState = async (taskId: string) => (await f.db.query<{ state: string }>({ text: 'SELECT state FROM tasks WHERE id = $1::uuid', values: [taskId] })).rows[0]?.state;

describe('an agent with senses', () => {
  it('reads a ticket, an estate row and two MCP servers, delegates a read-only check, proposes one cited write the auditor sees; the write lands once', async () => {
    provider.reply({
      status: 200,
      body: JSON.stringify({
        id: 'a',
        choices: [{ index: 0, message: { role: 'assistant', content: '{"verdict": "approve", "reason": "the ticket, the two charges and policy R-7 support a 500 cent refund"}' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 1, completion_tokens: 1 },
      }),
    });
    const { caseId, taskId } = await openTestCase(f.store, config, { caseType: 'refund', originKey: `senses-${randomUUID()}`, objective: 'settle ticket T-77' });

    const gate = await eventually(
      async () =>
        (await f.db.query<{ id: string; packet_digest: string; packet_paper_id: string }>({ text: `SELECT id, packet_digest, packet_paper_id FROM gates WHERE case_id = $1::uuid AND state = 'open'`, values: [caseId] })).rows[0],
      { timeoutMs: 60_000, what: 'the proposal waiting at its gate' },
    ).catch((err: unknown) => {
      throw new Error(`${String(err)}\n${node.output().slice(-4000)}`);
    });

    // The root's reads: four journal rows of turn 0, each completed, each source asked once.
    const all = await rows(caseId);
    const rootRows = all.filter((r) => r.task_id === taskId);
    expect(rootRows.filter((r) => r.turn === 0).map((r) => [r.ordinal, r.kind, r.tool_name, r.status])).toEqual([
      [1, 'read', 'helpdesk__tickets_get', 'completed'],
      [2, 'read', 'estate__entries_count', 'completed'],
      [3, 'read', 'everything__echo', 'completed'],
      [4, 'read', 'kb__kb_search', 'completed'],
    ]);
    expect(desk.requests).toEqual(['GET /api/tickets/T-77']);
    expect(kb.calls).toEqual([{ q: 'double charge' }]);
    expect(rootRows[0]!.response!.content).toContain('double charge');
    expect(rootRows[1]!.response!.content).toMatch(/"n":\s*2/);
    expect(rootRows[2]!.response!.content).toContain('refund T-77');

    // The child read the account and could not write: its literal proposal is a refused row.
    const childRows = all.filter((r) => r.task_id !== taskId);
    expect(childRows.map((r) => [r.kind, r.tool_name, r.status, r.response?.refusal ?? null])).toEqual([
      ['read', 'billing__accounts_get', 'completed', null],
      [expect.any(String), 'writes__propose', 'refused', expect.any(String)],
    ]);
    expect(f.target.requests.filter((r) => r.method === 'GET' && r.url === `/api/accounts/${ACCOUNT}`)).toHaveLength(1);
    const [child] = (await f.db.query<{ id: string; state: string }>({ text: 'SELECT id, state FROM tasks WHERE parent_id = $1::uuid', values: [taskId] })).rows;
    expect(child!.state).toBe('done');

    // The auditor was shown the three cited results with their provenance, and nothing of the author.
    expect(provider.received).toHaveLength(1);
    const audit = provider.received[0]!.body as { messages: { role: string; content: string }[] };
    const raw = JSON.stringify(audit);
    expect(raw).not.toContain('AUTHOR-PROMPT-5e1d');
    expect(raw).not.toContain('settle ticket T-77');
    const subject = JSON.parse(audit.messages.find((m) => m.role === 'user')!.content) as { evidence: { citation: { ref: string; tool: string }; provenance: Record<string, unknown> }[] };
    const cited = new Map(rootRows.filter((r) => r.turn === 0).map((r) => [r.tool_name, r.id]));
    expect(subject.evidence.map((e) => [e.citation.tool, e.citation.ref])).toEqual([
      ['helpdesk__tickets_get', cited.get('helpdesk__tickets_get')],
      ['estate__entries_count', cited.get('estate__entries_count')],
      ['kb__kb_search', cited.get('kb__kb_search')],
    ]);
    expect(subject.evidence[0]!.provenance).toMatchObject({ origin: { connector: 'helpdesk', operation: 'tickets.get', target: TICKETS }, trust: 'external' });
    expect(subject.evidence[1]!.provenance).toMatchObject({ origin: { connector: 'estate', operation: 'entries.count' }, trust: 'external' });
    expect(subject.evidence[2]!.provenance).toMatchObject({ trust: 'external' });
    expect(JSON.stringify(subject.evidence[2]!.provenance)).toContain('kb');

    // The packet at the gate carries the same citations; approved, the credit lands once.
    const { rows: paper } = await f.db.query<{ bytes: Buffer }>({
      text: 'SELECT r.bytes FROM papers p JOIN paper_revisions r ON r.paper_id = p.id AND r.revision = p.head_revision WHERE p.id = $1::uuid',
      values: [gate.packet_paper_id],
    });
    const packet = JSON.parse(paper[0]!.bytes.toString('utf8')) as { evidence: { ref: string }[] };
    expect(packet.evidence.map((e) => e.ref)).toEqual(subject.evidence.map((e) => e.citation.ref));
    const decided = await f.decide(node.port, TOKENS.bob, gate.id, { decision: 'HW-payment', verdict: 'approve', digest: gate.packet_digest });
    expect(decided.status, JSON.stringify(decided.body)).toBe(201);
    await eventually(async () => (await taskState(taskId)) === 'done', { timeoutMs: 40_000, what: 'root done' });
    expect(f.target.applies.get(ACCOUNT)).toBe(1);
    expect(f.target.balances.get(ACCOUNT)).toBe(1500);
    // Nothing was read twice on the way.
    expect(desk.requests).toHaveLength(1);
    expect(kb.calls).toHaveLength(1);
  });
});
